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
from pydantic import SecretStr

from core.config import ConfigError
from core.kafka_conf import reveal
from core.redact import remember_value
from runtime import safe_yaml
from runtime.files import (
    MAX_CONFIG_BYTES,
    MAX_PEM_BYTES,
    MAX_SECRET_BYTES,
    open_regular,
    read_text_bounded,
)

if TYPE_CHECKING:
    from core.sla import SlaConfig


def load_yaml(path: str | Path | None) -> dict[str, Any]:
    """The YAML document at ``path`` as a mapping ({} for None): a regular file within its cap
    (``runtime.files``), loaded within the alias, depth and duplicate-key rules of
    ``runtime.safe_yaml``."""
    if path is None:
        return {}
    try:
        text = read_text_bounded(path, MAX_CONFIG_BYTES)
    except OSError as exc:
        raise ConfigError(f"config: cannot read {path}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"config: {path} is not UTF-8 text (byte {exc.start})") from None
    try:
        data = safe_yaml.load(text) or {}
    except safe_yaml.RefusedYaml as exc:
        raise ConfigError(f"config: {path}: {exc}") from None
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
    file path, never a secret; a resolved value is remembered by the redactor (``remember``).
    """
    if value.startswith("env:"):
        name = value[4:]
        if name not in os.environ:
            raise ConfigError(f"environment variable {name} is not set")
        remember_value(os.environ[name])
        return os.environ[name]
    if value.startswith("file:"):
        path = value[5:]
        try:
            secret = read_text_bounded(path, MAX_SECRET_BYTES).strip()
        except OSError as exc:
            raise ConfigError(f"cannot read file {path}: {exc.strerror}") from None
        except UnicodeDecodeError:
            raise ConfigError(f"file {path} is not UTF-8 text") from None
        remember_value(secret)
        return secret
    return value


#: librdkafka's PEM files that it also takes as text: read once here (bounded, checked) and
#: handed over as the ``.pem`` setting, so the file librdkafka uses is the one checked.
PEM_SETTINGS = {
    "ssl.ca.location": "ssl.ca.pem",
    "ssl.certificate.location": "ssl.certificate.pem",
    "ssl.key.location": "ssl.key.pem",
}


def resolve_secrets(
    settings: Mapping[str, str | SecretStr], field: str = "kafka"
) -> dict[str, str]:
    """Client settings as a client takes them: secrets unwrapped (``core.kafka_conf.reveal``:
    the one place a ``kafka:`` section's ``SecretStr`` values leave their type), ``env:VAR``
    and ``file:PATH`` values resolved (``resolve_secret``);
    a PEM file librdkafka also takes as text (``PEM_SETTINGS``) read once, bounded, and handed
    over as text (a directory of CAs and a missing file stay paths: librdkafka names those);
    other files librdkafka opens checked first. An error names the key
    (``kafka.sasl.password: ...``)."""
    out = {}
    for key, value in reveal(settings).items():
        try:
            out[key] = resolve_secret(value)
            if not _is_client_file(key, out[key]):
                continue
            pem = PEM_SETTINGS.get(key.strip().lower())
            text = read_client_pem(out[key]) if pem and pem not in settings else None
            if text is None:
                check_client_file(out[key])
                continue
            del out[key]
            out[pem] = text  # type: ignore[index]
            if pem == "ssl.key.pem":
                remember_value(text)  # a private key: hidden wherever it might be printed
        except ConfigError as exc:
            raise ConfigError(f"{field}.{key}: {exc}") from None
        except OSError as exc:
            raise ConfigError(f"{field}.{key}: cannot read {out[key]}: {exc.strerror}") from None
        except UnicodeDecodeError:
            raise ConfigError(f"{field}.{key}: {out[key]} is not PEM text") from None
    return out


def read_client_pem(path: str) -> str | None:
    """The text of the PEM file at ``path`` (bounded, a regular file, never blocking); None for
    a directory (a CA path) or a missing file, which librdkafka names itself."""
    try:
        return read_text_bounded(path, MAX_PEM_BYTES)
    except (FileNotFoundError, IsADirectoryError):
        return None


def _is_client_file(key: str, value: str) -> bool:
    """Whether a librdkafka setting names a file it will open (``ssl.ca.location``, a keytab);
    ``probe`` asks librdkafka to find the system CAs itself."""
    key = key.strip().lower()
    return key.endswith((".location", ".keytab")) and value.strip() not in ("", "probe")


def check_client_file(path: str) -> None:
    """Refuse, before librdkafka opens it, a file that would block it or fill its memory (a
    FIFO, a device, a file over the PEM cap); a directory is a CA path, and a missing file is
    left to librdkafka's own message."""
    try:
        os.close(open_regular(path, MAX_PEM_BYTES))
    except (FileNotFoundError, IsADirectoryError):
        return


def load_sla(path: str | Path) -> SlaConfig:
    """Read and validate the SLA YAML file at ``path``."""
    from core.sla import parse_sla

    return parse_sla(load_yaml(path))
