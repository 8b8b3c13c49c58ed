"""TLS of the /metrics servers: exporter-toolkit's ``tls_server_config``, its PEM read once, and
the server context and client-certificate rules built from it."""

from __future__ import annotations

import contextlib
import ipaddress
import os
import ssl
import tempfile
import typing
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import Field, SecretStr, ValidationInfo, field_validator

from core.config import ConfigError, StageConfig
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


@dataclass(frozen=True)
class TlsPem:
    """The PEM bytes of a TLS config, read once at load: a server's context is built from these,
    never from the paths again (a path that changed since the check is not read)."""

    cert: bytes
    key: bytes = field(repr=False)
    client_ca: str | None = None


def peer_allowed(tls: TlsServerConfig | None, sock: ssl.SSLSocket) -> bool:
    """Whether a client's certificate holds one of ``client_allowed_sans`` (always, when
    none are configured): a DNS name, e-mail, URI or IP address matched exactly, as
    exporter-toolkit does (IP addresses compared as addresses)."""
    if tls is None or tls.client_allowed_sans is None:
        return True
    cert = sock.getpeercert()
    pairs: Any = (cert or {}).get("subjectAltName", ())
    sans = [str(value).strip() for _, value in pairs]
    allowed = {_san_key(a) for a in tls.client_allowed_sans}
    return any(_san_key(v) in allowed for v in sans)


def _san_key(value: str) -> str:
    """A SAN as compared: an IP address in its canonical form, anything else as written."""
    try:
        return str(ipaddress.ip_address(value))
    except ValueError:
        return value


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
