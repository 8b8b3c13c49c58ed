"""The configuration's I/O: the YAML file read, ``env:``/``file:`` secrets resolved, a port tried.

Kept apart from ``core.config``, which is pure (models, validators, one-line errors): the CLIs
call these before building a stage's config, and a stage resolves its secrets where its clients
run. Every failure is a ``ConfigError`` of one line naming the field, never a secret.
"""

from __future__ import annotations

import errno
import os
import socket
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from core.config import ConfigError

if TYPE_CHECKING:
    from core.sla import SlaConfig


def load_yaml(path: str | Path | None) -> dict[str, Any]:
    """The YAML document at ``path`` as a mapping ({} for None)."""
    if path is None:
        return {}
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"config: cannot read {path}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"config: {path} is not UTF-8 text (byte {exc.start})") from None
    try:
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"config: {path} is not valid YAML: {str(exc).splitlines()[0]}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"config: {path} must hold a mapping at the top level")
    return data


def check_port_free(
    host: str,
    port: int,
    field: str = "metrics-port",
    host_field: str = "metrics-host",
    hint: str = "pick another port, or 0 for any free port",
) -> None:
    """Fail now, before any connection, if a server could not bind ``host:port``: a host that
    does not resolve names ``host_field``, a port in use ``field``."""
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
    except OverflowError:
        raise ConfigError(f"{field}: must be a TCP port (got {port})") from None
    except (OSError, UnicodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ConfigError(
            f"{host_field}: cannot resolve {host!r} ({why}); use an address of this host, "
            "e.g. 0.0.0.0 or 127.0.0.1"
        ) from None
    if port == 0:
        return
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the servers themselves do
        try:
            s.bind((host, port))
        except OverflowError:
            raise ConfigError(f"{field}: must be a TCP port (got {port})") from None
        except OSError as exc:
            if exc.errno == errno.EADDRNOTAVAIL:
                raise ConfigError(
                    f"{host_field}: cannot listen on {host} ({exc.strerror}): not an address "
                    "of this host"
                ) from None
            raise ConfigError(
                f"{field}: cannot listen on {host}:{port} ({exc.strerror}); {hint}"
            ) from None


def resolve_secret(value: str) -> str:
    """``value`` with an ``env:VAR`` or ``file:PATH`` reference resolved (anything else as is).

    An unset variable or an unreadable file is a ConfigError that shows the variable name or the
    file path, never a secret.
    """
    if value.startswith("env:"):
        name = value[4:]
        if name not in os.environ:
            raise ConfigError(f"environment variable {name} is not set")
        return os.environ[name]
    if value.startswith("file:"):
        path = value[5:]
        try:
            return Path(path).read_text().strip()
        except OSError as exc:
            raise ConfigError(f"cannot read file {path}: {exc.strerror}") from None
        except UnicodeDecodeError:
            raise ConfigError(f"file {path} is not UTF-8 text") from None
    return value


def resolve_secrets(settings: Mapping[str, str], field: str = "kafka") -> dict[str, str]:
    """Client settings with ``env:VAR`` and ``file:PATH`` values resolved (``resolve_secret``);
    an error names the key (``kafka.sasl.password: ...``)."""
    out = {}
    for key, value in settings.items():
        try:
            out[key] = resolve_secret(value)
        except ConfigError as exc:
            raise ConfigError(f"{field}.{key}: {exc}") from None
    return out


def load_sla(path: str | Path) -> SlaConfig:
    """Read and validate the SLA YAML file at ``path``."""
    from core.sla import parse_sla

    return parse_sla(load_yaml(path))
