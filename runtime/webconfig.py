"""``--web-config-file``: TLS and basic auth for /metrics, in Prometheus' exporter-toolkit format.

The same file a Prometheus exporter takes (``tls_server_config``, ``basic_auth_users`` with bcrypt
hashes), so operators reuse what they already run. Parsing, the TLS context and the password check
live here; each /metrics server applies them.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import ssl
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator

from core.config import ConfigError, StageConfig, build
from runtime.config_io import load_yaml
from runtime.files import MAX_PEM_BYTES, read_bounded, read_text_bounded

#: exporter-toolkit's client_auth_type values and what Python's ssl module can enforce of each.
CLIENT_AUTH = {
    "NoClientCert": ssl.CERT_NONE,
    "RequestClientCert": ssl.CERT_OPTIONAL,
    "RequireAnyClientCert": ssl.CERT_REQUIRED,
    "VerifyClientCertIfGiven": ssl.CERT_OPTIONAL,
    "RequireAndVerifyClientCert": ssl.CERT_REQUIRED,
}
TLS_VERSIONS = {
    "TLS10": ssl.TLSVersion.TLSv1,
    "TLS11": ssl.TLSVersion.TLSv1_1,
    "TLS12": ssl.TLSVersion.TLSv1_2,
    "TLS13": ssl.TLSVersion.TLSv1_3,
}
#: A bcrypt hash as htpasswd and exporter-toolkit write it: ``$2y$``, a cost of 04-31, then 22
#: characters of salt and 31 of hash.
BCRYPT_HASH = re.compile(r"\$2[aby]\$(0[4-9]|[12][0-9]|3[01])\$[./A-Za-z0-9]{53}")
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

#: The readiness route of both /metrics servers: it renders nothing and is served without basic
#: auth (a kubelet probe cannot send credentials without writing them into the pod spec).
READY_PATH = "/-/ready"


class TlsServerConfig(StageConfig):
    """``tls_server_config``: the server certificate, and optionally client certificates."""

    cert_file: str
    key_file: str
    client_auth_type: Literal[
        "NoClientCert",
        "RequestClientCert",
        "RequireAnyClientCert",
        "VerifyClientCertIfGiven",
        "RequireAndVerifyClientCert",
    ] = "NoClientCert"
    client_ca_file: str | None = None
    min_version: Literal["TLS10", "TLS11", "TLS12", "TLS13"] = "TLS12"


class WebConfigModel(StageConfig):
    """The file's top level (``http_server_config`` is accepted for compatibility, unused)."""

    tls_server_config: TlsServerConfig | None = None
    basic_auth_users: dict[str, str] = Field(default_factory=dict)
    http_server_config: dict[str, Any] = Field(default_factory=dict)

    @field_validator("basic_auth_users")
    @classmethod
    def _bcrypt_hashes(cls, users: dict[str, str]) -> dict[str, str]:
        """Every hash checked now, by bcrypt itself: a malformed one would raise on each scrape."""
        import bcrypt

        for name, hashed in users.items():
            ok = BCRYPT_HASH.fullmatch(hashed) is not None
            if ok:
                try:
                    bcrypt.checkpw(b"", hashed.encode())
                except ValueError:
                    ok = False
            if not ok:
                raise ValueError(
                    f"user {name!r}: the password must be a bcrypt hash ($2y$, a cost of 04-31, "
                    "then 53 characters; e.g. htpasswd -nBC 10 USER)"
                )
        return users


@dataclass(frozen=True)
class WebConfig:
    """A loaded web config: an SSL context (or None) and the basic-auth users."""

    tls: TlsServerConfig | None = None
    users: dict[str, str] = field(default_factory=dict)
    #: digests of (user, password, hash) that passed; failures are never remembered
    _verified: set[bytes] = field(default_factory=set, compare=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, compare=False, repr=False)
    _checks: threading.BoundedSemaphore = field(
        default_factory=lambda: threading.BoundedSemaphore(MAX_BCRYPT_CHECKS),
        compare=False,
        repr=False,
    )

    def ssl_context(self) -> ssl.SSLContext | None:
        """The server-side TLS context the file asks for (None: plain HTTP)."""
        if self.tls is None:
            return None
        return server_ssl_context(self.tls)

    def authorized(self, header: str | None) -> bool:
        """Whether an ``Authorization`` header passes (always, when no users are configured)."""
        return self.check(header) is True

    def check(self, header: str | None) -> bool | None:
        """Whether an ``Authorization`` header passes; None when no bcrypt check came free within
        ``BCRYPT_WAIT_S`` (the server answers 503).

        bcrypt is slow on purpose (~50-250 ms a check); a scrape every few seconds must not pay
        it each time, so a verified (user, password) is remembered, as exporter-toolkit does.
        Only successes: remembered failures once filled the memory, and the real credential was
        never remembered after 1,024 wrong guesses.
        """
        if not self.users:
            return True
        user, password = parse_basic_auth(header)
        hashed = self.users.get(user or "")
        if user is None or password is None or hashed is None:
            return False
        secret = password.encode(errors="surrogatepass")
        if len(secret) > MAX_PASSWORD_BYTES:
            return False
        key = hashlib.sha256(b"\0".join([user.encode(errors="surrogatepass"), secret,
                                          hashed.encode()])).digest()  # fmt: skip
        with self._lock:
            if key in self._verified:
                return True
        if not self._checks.acquire(timeout=BCRYPT_WAIT_S):
            return None
        try:
            import bcrypt

            ok = bcrypt.checkpw(secret, hashed.encode())
        finally:
            self._checks.release()
        if ok:
            with self._lock:
                if len(self._verified) < MAX_REMEMBERED:
                    self._verified.add(key)
        return ok


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


def server_ssl_context(tls: TlsServerConfig) -> ssl.SSLContext:
    """A TLS server context; unreadable or mismatched files are one ConfigError line."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = TLS_VERSIONS[tls.min_version]
    try:
        for path in (tls.cert_file, tls.key_file):
            read_bounded(path, MAX_PEM_BYTES)  # a FIFO or a device would hang OpenSSL's read
        ctx.load_cert_chain(certfile=tls.cert_file, keyfile=tls.key_file)
        if tls.client_ca_file:
            ctx.load_verify_locations(cadata=read_text_bounded(tls.client_ca_file, MAX_PEM_BYTES))
    except (OSError, ssl.SSLError, UnicodeDecodeError) as exc:
        reason = getattr(exc, "strerror", None) or getattr(exc, "reason", None) or str(exc)
        raise ConfigError(f"web-config-file: tls_server_config: cannot load: {reason}") from None
    ctx.verify_mode = CLIENT_AUTH[tls.client_auth_type]
    if tls.client_auth_type != "NoClientCert" and not tls.client_ca_file:
        # Python's ssl verifies every client certificate it asks for, so it needs the CA
        raise ConfigError(
            f"web-config-file: tls_server_config.client_auth_type {tls.client_auth_type} "
            "needs client_ca_file"
        )
    return ctx


def load_web_config(path: str | Path | None) -> WebConfig | None:
    """The web config file at ``path`` (None: no TLS, no auth), validated up front."""
    if path is None:
        return None
    try:
        document = load_yaml(path)
    except ConfigError as exc:  # load_yaml names the --config file's field; this is another one
        raise ConfigError(str(exc).replace("config: ", "web-config-file: ", 1)) from None
    model = build(WebConfigModel, document, prefix="web-config-file")
    web = WebConfig(model.tls_server_config, dict(model.basic_auth_users))
    web.ssl_context()  # fail now, before any server starts, on unreadable certificates
    return web


#: The answer to a scrape without valid credentials (Prometheus shows it as the target's error).
UNAUTHORIZED_HEADERS = [
    ("WWW-Authenticate", 'Basic realm="nines"'),
    ("Content-Type", "text/plain; charset=utf-8"),
]
