"""``--web-config-file``: TLS and basic auth for /metrics, in Prometheus' exporter-toolkit format.

The same file a Prometheus exporter takes (``tls_server_config``, ``basic_auth_users`` with bcrypt
hashes, ``http_server_config``), so operators reuse what they already run. The file's model and
its loading live here; its TLS in ``runtime.webtls``, its users' checks in ``runtime.basic_auth``;
each /metrics server applies them.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import Field, SecretStr, field_validator

from core.config import ConfigError, StageConfig, build
from runtime.basic_auth import UNAUTHORIZED_HEADERS, BasicAuth, check_hash
from runtime.config_io import load_yaml
from runtime.webtls import TlsPem, TlsServerConfig, peer_allowed, read_pem, server_ssl_context

#: The response headers ``http_server_config.headers`` may set (exporter-toolkit's list), and
#: the values it allows where it checks them.
HEADER_VALUES: dict[str, tuple[str, ...] | None] = {
    "Content-Security-Policy": None,
    "X-Frame-Options": ("deny", "sameorigin"),
    "X-Content-Type-Options": ("nosniff",),
    "X-XSS-Protection": None,
    "Strict-Transport-Security": None,
}
#: The readiness route of both /metrics servers: it renders nothing and is served without basic
#: auth (a kubelet probe cannot send credentials without writing them into the pod spec).
READY_PATH = "/-/ready"


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
        """Every hash checked now (``basic_auth.check_hash``): a start-up costs no bcrypt time."""
        for name, secret in (users or {}).items():
            check_hash(name, secret.get_secret_value())
        return users


@dataclass(frozen=True)
class WebConfig:
    """A loaded web config: an SSL context (or None), the basic-auth users, response headers."""

    tls: TlsServerConfig | None = None
    #: user → bcrypt hash (``BasicAuth`` unwraps them where bcrypt checks a password)
    users: dict[str, SecretStr] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)
    pem: TlsPem | None = field(default=None, repr=False)
    auth: BasicAuth = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "auth", BasicAuth(self.users))

    def ssl_context(self) -> ssl.SSLContext | None:
        """The server-side TLS context the file asks for (None: plain HTTP)."""
        if self.tls is None:
            return None
        return server_ssl_context(self.tls, self.pem)

    def authorized(self, header: str | None) -> bool:
        """Whether an ``Authorization`` header passes (always, when no users are configured)."""
        return self.check(header) is True

    def check(self, header: str | None) -> bool | None:
        """Whether an ``Authorization`` header passes; None when no bcrypt check came free in
        time (the server answers 503): :meth:`BasicAuth.check`."""
        return self.auth.check(header)

    def peer_allowed(self, sock: ssl.SSLSocket) -> bool:
        """Whether a client's certificate holds one of ``client_allowed_sans``."""
        return peer_allowed(self.tls, sock)


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


__all__ = [
    "READY_PATH",
    "UNAUTHORIZED_HEADERS",
    "HttpServerConfig",
    "WebConfig",
    "WebConfigModel",
    "load_web_config",
]
