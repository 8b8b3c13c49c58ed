"""Basic auth of the /metrics servers: exporter-toolkit's ``basic_auth_users`` (bcrypt hashes),
checked at a bounded cost and at the same cost for an unknown user as for a known one.

bcrypt is slow on purpose: a verified (user, password) is remembered, as exporter-toolkit does,
so a scrape every few seconds pays no check; at most ``MAX_BCRYPT_CHECKS`` run at once, and a
request that waits longer than ``BCRYPT_WAIT_S`` for one is answered 503 (busy).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
import threading
from dataclasses import dataclass, field

from pydantic import SecretStr

#: A bcrypt hash as htpasswd and exporter-toolkit write it: ``$2y$``, a cost of 04-31, then 22
#: characters of salt and 31 of hash.
BCRYPT_HASH = re.compile(r"\$2[aby]\$(0[4-9]|[12][0-9]|3[01])\$[./A-Za-z0-9]{53}")
#: The highest bcrypt cost accepted. Every scrape that brings credentials not yet remembered,
#: and every wrong guess, pays one check at the hash's cost, and each step doubles it: the
#: check must end within a scrape (``BCRYPT_WAIT_S`` queued, Prometheus' 10 s default scrape
#: timeout) and within the ``close()`` of the server (it waits 5 s for a check in flight, so
#: that SIGTERM is prompt), with room for a slower core than ours; cost 14 does (about a second
#: a check: docs/configuration.md), 15 would not on a core half as fast, and 31 takes days.
#: The cost is read from the hash before any hashing; the hash is checked at start at cost 04.
MAX_BCRYPT_COST = 14
#: bcrypt's base64 alphabet (the fake hash's digest).
_BCRYPT_CHARS = "./ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
#: bcrypt reads only a password's first 72 bytes (and bcrypt 5 refuses longer ones): a longer
#: password is refused, never checked by its prefix, so knowing 72 bytes of it is not enough.
MAX_PASSWORD_BYTES = 72
#: bcrypt checks (~50-250 ms of CPU each) run at once; a flood of wrong guesses queues for these
#: while a scrape with remembered credentials passes without one.
MAX_BCRYPT_CHECKS = 2
#: Seconds a request waits for a bcrypt check before it is answered 503 (busy).
BCRYPT_WAIT_S = 2.0
#: Verified credentials remembered (only ever successes: one per user in practice).
MAX_REMEMBERED = 1024
#: The answer to a scrape without valid credentials (Prometheus shows it as the target's error).
UNAUTHORIZED_HEADERS = [
    ("WWW-Authenticate", 'Basic realm="nines"'),
    ("Content-Type", "text/plain; charset=utf-8"),
]


def bcrypt_cost(hashed: str) -> int:
    """The cost of a hash that matches ``BCRYPT_HASH``."""
    return int(hashed[4:6])


def with_cost(hashed: str, cost: int) -> str:
    """``hashed`` with another cost: the same salt and digest, so bcrypt parses it the same."""
    return f"{hashed[:4]}{cost:02d}{hashed[6:]}"


def fake_hash(cost: int) -> str:
    """A bcrypt hash no password matches (a random salt and digest) at ``cost``: an unknown
    user's password is checked against it, so that it costs what a known user's does (as
    exporter-toolkit checks a fixed hash), and the answer's timing does not tell users apart."""
    import bcrypt

    digest = "".join(secrets.choice(_BCRYPT_CHARS) for _ in range(31))
    return bcrypt.gensalt(cost).decode() + digest


def check_hash(name: str, hashed: str) -> None:
    """A user's hash, checked at start: its cost read first (a cost of 31 takes days to check),
    then its salt parsed by bcrypt itself at cost 04 (a malformed one would raise on each
    scrape); nothing is hashed at the hash's own cost, so a start-up costs no bcrypt time.
    ValueError says what is wrong."""
    import bcrypt

    ok = BCRYPT_HASH.fullmatch(hashed) is not None
    if ok and bcrypt_cost(hashed) > MAX_BCRYPT_COST:
        raise ValueError(
            f"user {name!r}: bcrypt cost {bcrypt_cost(hashed)} is above "
            f"{MAX_BCRYPT_COST}, the most a scrape can wait for (each step doubles a "
            "check); hash again with e.g. htpasswd -nBC 10 USER"
        )
    if ok:
        try:
            bcrypt.checkpw(b"", with_cost(hashed, 4).encode())
        except ValueError:
            ok = False
    if not ok:
        raise ValueError(
            f"user {name!r}: the password must be a bcrypt hash ($2y$, a cost of 04-31, "
            "then 53 characters; e.g. htpasswd -nBC 10 USER)"
        )


def parse_basic_auth(header: str | None) -> tuple[str | None, str | None]:
    """(user, password) of a ``Basic`` Authorization header; (None, None) when absent or bad."""
    if not header:
        return None, None
    scheme, _, token = header.partition(" ")
    if not hmac.compare_digest(scheme.lower(), "basic"):
        return None, None
    try:
        user, sep, password = base64.b64decode(token.strip(), validate=True).decode().partition(":")
    except (ValueError, UnicodeDecodeError):
        return None, None
    return (user, password) if sep else (None, None)


@dataclass(frozen=True)
class BasicAuth:
    """The users of a web config and what their checks remember: ``check`` answers whether an
    ``Authorization`` header passes."""

    #: user → bcrypt hash, unwrapped only where bcrypt checks a password (``check``)
    users: dict[str, SecretStr] = field(default_factory=dict)
    #: an unknown user's password is checked against this, at the users' highest cost
    _fake: str = field(default="", compare=False, repr=False)
    #: digests of (user, password, hash) that passed; failures are never remembered
    _verified: set[bytes] = field(default_factory=set, compare=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, compare=False, repr=False)
    _checks: threading.BoundedSemaphore = field(
        default_factory=lambda: threading.BoundedSemaphore(MAX_BCRYPT_CHECKS),
        compare=False,
        repr=False,
    )

    def __post_init__(self) -> None:
        if self.users and not self._fake:
            cost = max(bcrypt_cost(h.get_secret_value()) for h in self.users.values())
            object.__setattr__(self, "_fake", fake_hash(cost))

    def check(self, header: str | None) -> bool | None:
        """Whether an ``Authorization`` header passes; None when no bcrypt check came free within
        ``BCRYPT_WAIT_S`` (the server answers 503).

        bcrypt is slow on purpose (~50-250 ms a check); a scrape every few seconds must not pay
        it each time, so a verified (user, password) is remembered, as exporter-toolkit does.
        Only successes: remembered failures once filled the memory, and the real credential was
        never remembered after 1,024 wrong guesses. An unknown user's password is checked
        against a fake hash of the users' highest cost, so a wrong user name costs what a wrong
        password does and the timing does not tell which users exist.
        """
        if not self.users:
            return True
        user, password = parse_basic_auth(header)
        if user is None or password is None:
            return False
        secret = password.encode(errors="surrogatepass")
        if len(secret) > MAX_PASSWORD_BYTES:
            return False
        known = self.users.get(user)
        hashed = self._fake if known is None else known.get_secret_value()
        key = hashlib.sha256(b"\0".join([user.encode(errors="surrogatepass"), secret,
                                          hashed.encode()])).digest()  # fmt: skip
        with self._lock:
            if key in self._verified:
                return True
        if not self._checks.acquire(timeout=BCRYPT_WAIT_S):
            return None
        try:
            import bcrypt

            ok = bcrypt.checkpw(secret, hashed.encode()) and known is not None
        finally:
            self._checks.release()
        if ok:
            with self._lock:
                if len(self._verified) < MAX_REMEMBERED:
                    self._verified.add(key)
        return ok
