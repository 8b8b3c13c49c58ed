"""``--web-config-file``: TLS and basic auth for /metrics, in Prometheus' exporter-toolkit format.

The same file a Prometheus exporter takes (``tls_server_config``, ``basic_auth_users`` with bcrypt
hashes), so operators reuse what they already run. Parsing, the TLS context and the password check
live here; each /metrics server applies them.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import ipaddress
import os
import re
import secrets
import ssl
import tempfile
import threading
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, SecretStr, ValidationInfo, field_validator

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
#: exporter-toolkit's ``max_version`` default: whatever the peers speak up to TLS 1.3.
TLS_VERSION_ORDER = ("TLS10", "TLS11", "TLS12", "TLS13")
#: The cipher suites exporter-toolkit takes by Go's names (``tls.CipherSuites()``), as OpenSSL
#: names them. Go applies ``cipher_suites`` to TLS 1.2 and below only, and so does OpenSSL's
#: cipher list: the TLS 1.3 names (None) are accepted and change nothing, as in Go.
CIPHER_SUITES = {
    "TLS_RSA_WITH_AES_128_CBC_SHA": "AES128-SHA",
    "TLS_RSA_WITH_AES_256_CBC_SHA": "AES256-SHA",
    "TLS_RSA_WITH_AES_128_GCM_SHA256": "AES128-GCM-SHA256",
    "TLS_RSA_WITH_AES_256_GCM_SHA384": "AES256-GCM-SHA384",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA": "ECDHE-ECDSA-AES128-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA": "ECDHE-ECDSA-AES256-SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA": "ECDHE-RSA-AES128-SHA",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA": "ECDHE-RSA-AES256-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256": "ECDHE-ECDSA-AES128-GCM-SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384": "ECDHE-ECDSA-AES256-GCM-SHA384",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256": "ECDHE-RSA-AES128-GCM-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384": "ECDHE-RSA-AES256-GCM-SHA384",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-RSA-CHACHA20-POLY1305",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-ECDSA-CHACHA20-POLY1305",
    "TLS_AES_128_GCM_SHA256": None,
    "TLS_AES_256_GCM_SHA384": None,
    "TLS_CHACHA20_POLY1305_SHA256": None,
}
#: exporter-toolkit's ``curve_preferences`` names, as OpenSSL names the groups.
CURVES = {"CurveP256": "prime256v1", "CurveP384": "secp384r1", "CurveP521": "secp521r1",
          "X25519": "X25519"}  # fmt: skip
#: The response headers ``http_server_config.headers`` may set (exporter-toolkit's list), and
#: the values it allows where it checks them.
HEADER_VALUES: dict[str, tuple[str, ...] | None] = {
    "Content-Security-Policy": None,
    "X-Frame-Options": ("deny", "sameorigin"),
    "X-Content-Type-Options": ("nosniff",),
    "X-XSS-Protection": None,
    "Strict-Transport-Security": None,
}
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

#: The readiness route of both /metrics servers: it renders nothing and is served without basic
#: auth (a kubelet probe cannot send credentials without writing them into the pod spec).
READY_PATH = "/-/ready"


TlsVersion = Literal["TLS10", "TLS11", "TLS12", "TLS13"]


class TlsServerConfig(StageConfig):
    """``tls_server_config``: the server certificate, and optionally client certificates.

    Every key of exporter-toolkit's ``tls_server_config``; the certificate, key and client CA
    each as a file (``*_file``) or inline (PEM text).
    """

    cert: str | None = None
    key: SecretStr | None = None
    client_ca: str | None = None
    cert_file: str | None = Field(default=None, validate_default=True)
    key_file: str | None = Field(default=None, validate_default=True)
    client_ca_file: str | None = None
    client_auth_type: Literal[
        "NoClientCert",
        "RequestClientCert",
        "RequireAnyClientCert",
        "VerifyClientCertIfGiven",
        "RequireAndVerifyClientCert",
    ] = "NoClientCert"
    client_allowed_sans: list[str] | None = None
    min_version: TlsVersion = "TLS12"
    max_version: TlsVersion = "TLS13"
    cipher_suites: list[str] | None = None
    prefer_server_cipher_suites: bool = True
    curve_preferences: list[Literal["CurveP256", "CurveP384", "CurveP521", "X25519"]] | None = None

    @field_validator("cert_file", "key_file", "client_ca_file")
    @classmethod
    def _one_source(cls, path: str | None, info: ValidationInfo) -> str | None:
        """A certificate and a key, each from a file or inline, never both."""
        inline = str(info.field_name).removesuffix("_file")
        if path is not None and info.data.get(inline) is not None:
            raise ValueError(f"give {info.field_name} or {inline} (the PEM text), not both")
        if path is None and info.data.get(inline) is None and inline != "client_ca":
            raise ValueError(f"required (or {inline}: the PEM text itself)")
        return path

    @field_validator("client_allowed_sans")
    @classmethod
    def _needs_a_certificate(cls, sans: list[str] | None, info: ValidationInfo) -> Any:
        if sans is not None and info.data.get("client_auth_type") not in (
            "RequireAnyClientCert",
            "RequireAndVerifyClientCert",
        ):
            raise ValueError(
                "needs client_auth_type RequireAndVerifyClientCert (or RequireAnyClientCert): "
                "without a client certificate there is no SAN to match"
            )
        return sans

    @field_validator("max_version")
    @classmethod
    def _in_order(cls, version: str, info: ValidationInfo) -> str:
        low = info.data.get("min_version", "TLS12")
        if TLS_VERSION_ORDER.index(version) < TLS_VERSION_ORDER.index(low):
            raise ValueError(f"below min_version {low}")
        return version

    @field_validator("cipher_suites")
    @classmethod
    def _known_suites(cls, suites: list[str] | None) -> list[str] | None:
        """Go's names of its secure suites (``tls.CipherSuites()``), as exporter-toolkit takes."""
        for suite in suites or ():
            if suite not in CIPHER_SUITES:
                raise ValueError(
                    f"unknown cipher suite {suite!r} (Go's names: {', '.join(CIPHER_SUITES)})"
                )
        return suites

    @field_validator("curve_preferences")
    @classmethod
    def _one_curve(cls, curves: list[str] | None) -> list[str] | None:
        # Python's ssl module sets one ECDH curve (set_ecdh_curve), never a preference list
        if curves is not None and len(curves) != 1:
            raise ValueError("nines applies one curve only (Python's ssl module): list one")
        return curves


class HttpServerConfig(StageConfig):
    """``http_server_config``: ``headers`` are added to every response; ``http2`` is accepted
    and changes nothing (nines speaks HTTP/1.1, which every Prometheus speaks)."""

    http2: bool = True
    headers: dict[str, str] = Field(default_factory=dict)

    @field_validator("headers")
    @classmethod
    def _header_values(cls, headers: dict[str, str]) -> dict[str, str]:
        """exporter-toolkit's allowed values, and no line break (it would split the header)."""
        for name, value in headers.items():
            if name not in HEADER_VALUES:
                raise ValueError(
                    f"{name}: not a header nines sets (one of {', '.join(HEADER_VALUES)})"
                )
            allowed = HEADER_VALUES[name]
            if allowed is not None and value.lower() not in allowed:
                raise ValueError(f"{name}: must be one of {', '.join(allowed)}")
            if any(c in value for c in "\r\n\0"):
                raise ValueError(f"{name}: a header value holds no line break")
        return headers


class WebConfigModel(StageConfig):
    """The file's top level: every key of exporter-toolkit's web config but ``rate_limit``."""

    # null (a key with nothing under it) is the default, as exporter-toolkit's YAML reads it
    tls_server_config: TlsServerConfig | None = None
    #: bcrypt hashes, typed secret as exporter-toolkit types them (``config.Secret``): a hash
    #: can be cracked offline, so no repr or dump shows one
    basic_auth_users: dict[str, SecretStr] | None = None
    http_server_config: HttpServerConfig | None = None
    rate_limit: dict[str, Any] | None = None

    @field_validator("rate_limit")
    @classmethod
    def _no_rate_limit(cls, value: Any) -> Any:
        if value is not None:
            raise ValueError(
                "not supported by nines (its /metrics bounds connections, renders and bcrypt "
                "checks itself; docs/configuration.md); remove it"
            )
        return value

    @field_validator("basic_auth_users")
    @classmethod
    def _bcrypt_hashes(cls, users: dict[str, SecretStr] | None) -> dict[str, SecretStr] | None:
        """Every hash checked now: its cost read first (a cost of 31 takes days to check), then
        its salt parsed by bcrypt itself at cost 04 (a malformed one would raise on each scrape);
        nothing is hashed at the hash's own cost, so a start-up costs no bcrypt time."""
        import bcrypt

        for name, secret in (users or {}).items():
            hashed = secret.get_secret_value()
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
        return users


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


@dataclass(frozen=True)
class TlsPem:
    """The PEM bytes of a TLS config, read once at load: a server's context is built from these,
    never from the paths again (a path that changed since the check is not read)."""

    cert: bytes
    key: bytes = field(repr=False)
    client_ca: str | None = None


@dataclass(frozen=True)
class WebConfig:
    """A loaded web config: an SSL context (or None), the basic-auth users, response headers."""

    tls: TlsServerConfig | None = None
    #: user → bcrypt hash, unwrapped only where bcrypt checks a password (``check``)
    users: dict[str, SecretStr] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)
    pem: TlsPem | None = field(default=None, repr=False)
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

    def ssl_context(self) -> ssl.SSLContext | None:
        """The server-side TLS context the file asks for (None: plain HTTP)."""
        if self.tls is None:
            return None
        return server_ssl_context(self.tls, self.pem)

    def authorized(self, header: str | None) -> bool:
        """Whether an ``Authorization`` header passes (always, when no users are configured)."""
        return self.check(header) is True

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

    def peer_allowed(self, sock: ssl.SSLSocket) -> bool:
        """Whether a client's certificate holds one of ``client_allowed_sans`` (always, when
        none are configured): a DNS name, e-mail, URI or IP address matched exactly, as
        exporter-toolkit does (IP addresses compared as addresses)."""
        if self.tls is None or self.tls.client_allowed_sans is None:
            return True
        cert = sock.getpeercert()
        pairs: Any = (cert or {}).get("subjectAltName", ())
        sans = [str(value).strip() for _, value in pairs]
        allowed = {_san_key(a) for a in self.tls.client_allowed_sans}
        return any(_san_key(v) in allowed for v in sans)


def _san_key(value: str) -> str:
    """A SAN as compared: an IP address in its canonical form, anything else as written."""
    try:
        return str(ipaddress.ip_address(value))
    except ValueError:
        return value


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


def read_pem(tls: TlsServerConfig) -> TlsPem:
    """The certificate, key and client CA, each read once through the bounded reader (a FIFO
    or a device would hang OpenSSL's own read); unreadable ones are one ConfigError line."""
    try:
        cert = key = ca = None
        if tls.cert_file is not None:
            cert = read_bounded(tls.cert_file, MAX_PEM_BYTES)
        if tls.key_file is not None:
            key = read_bounded(tls.key_file, MAX_PEM_BYTES)
        if tls.client_ca_file is not None:
            ca = read_text_bounded(tls.client_ca_file, MAX_PEM_BYTES)
    except (OSError, UnicodeDecodeError) as exc:
        _cannot_load(exc)
    inline_key = tls.key.get_secret_value() if tls.key is not None else ""
    return TlsPem(
        cert if cert is not None else (tls.cert or "").encode(),
        key if key is not None else inline_key.encode(),
        ca if ca is not None else tls.client_ca,
    )


def _cannot_load(exc: BaseException) -> typing.NoReturn:
    reason = getattr(exc, "strerror", None) or getattr(exc, "reason", None) or str(exc)
    raise ConfigError(f"web-config-file: tls_server_config: cannot load: {reason}") from None


def _load_chain(ctx: ssl.SSLContext, pem: TlsPem) -> None:
    """``load_cert_chain`` from bytes: Python's ssl takes paths only, so the bytes read at load
    go to files in a private directory (0700, on /dev/shm when there is one: a key never lands
    on a disk), are loaded, and are removed at once."""
    shm = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
    with tempfile.TemporaryDirectory(prefix="nines-tls-", dir=shm) as private:
        paths = []
        for name, data in (("cert.pem", pem.cert), ("key.pem", pem.key)):
            path = os.path.join(private, name)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as out:
                out.write(data)
            paths.append(path)
        try:
            ctx.load_cert_chain(certfile=paths[0], keyfile=paths[1])
        finally:
            for path in paths:
                with contextlib.suppress(OSError):
                    os.unlink(path)


def server_ssl_context(tls: TlsServerConfig, pem: TlsPem | None = None) -> ssl.SSLContext:
    """A TLS server context from the PEM bytes read once (``read_pem``); unusable files or
    settings are one ConfigError line."""
    pem = pem if pem is not None else read_pem(tls)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = TLS_VERSIONS[tls.min_version]
    ctx.maximum_version = TLS_VERSIONS[tls.max_version]
    try:
        _load_chain(ctx, pem)
        if pem.client_ca:
            ctx.load_verify_locations(cadata=pem.client_ca)
    except (OSError, ssl.SSLError, UnicodeDecodeError) as exc:
        _cannot_load(exc)
    if tls.cipher_suites:
        names = [n for n in (CIPHER_SUITES[c] for c in tls.cipher_suites) if n is not None]
        if names:  # only TLS 1.3 names: nothing to restrict, as in Go
            try:
                ctx.set_ciphers(":".join(names))
            except ssl.SSLError:
                raise ConfigError(
                    "web-config-file: tls_server_config.cipher_suites: this OpenSSL offers none "
                    "of them"
                ) from None
    if not tls.prefer_server_cipher_suites:
        ctx.options &= ~ssl.OP_CIPHER_SERVER_PREFERENCE
    if tls.curve_preferences:
        ctx.set_ecdh_curve(CURVES[tls.curve_preferences[0]])
    ctx.verify_mode = CLIENT_AUTH[tls.client_auth_type]
    if tls.client_auth_type != "NoClientCert" and not pem.client_ca:
        # Python's ssl verifies every client certificate it asks for, so it needs the CA
        raise ConfigError(
            f"web-config-file: tls_server_config.client_auth_type {tls.client_auth_type} "
            "needs client_ca_file"
        )
    return ctx


def load_web_config(path: str | Path | None) -> WebConfig | None:
    """The web config file at ``path`` (None: no TLS, no auth), validated up front; its TLS
    files are read here, once."""
    if path is None:
        return None
    try:
        document = load_yaml(path)
    except ConfigError as exc:  # load_yaml names the --config file's field; this is another one
        raise ConfigError(str(exc).replace("config: ", "web-config-file: ", 1)) from None
    model = build(WebConfigModel, document, prefix="web-config-file")
    tls = model.tls_server_config
    web = WebConfig(
        tls,
        dict(model.basic_auth_users or {}),
        dict(model.http_server_config.headers) if model.http_server_config else {},
        read_pem(tls) if tls is not None else None,
    )
    web.ssl_context()  # fail now, before any server starts, on unusable certificates
    return web


#: The answer to a scrape without valid credentials (Prometheus shows it as the target's error).
UNAUTHORIZED_HEADERS = [
    ("WWW-Authenticate", 'Basic realm="nines"'),
    ("Content-Type", "text/plain; charset=utf-8"),
]
