"""Configuration plumbing: YAML + flags into frozen, validated per-stage models.

Each stage owns its model (``probes.config``, ``streaming.config``, ``testbroker.config``);
this module loads YAML, applies flag overrides and turns validation errors into one line that
names the field, which the CLI prints before exiting with status 2.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

M = TypeVar("M", bound=BaseModel)

#: A setting whose name says it holds a secret; its value is never shown in a message.
SECRET_NAME = re.compile(r"pass|secret|token|credential|private|key|jaas|sasl|auth|cert", re.I)
#: Sections that pass client settings through (librdkafka's): no value of theirs is ever shown.
CLIENT_SECTIONS = frozenset({"kafka"})
#: The password of a URL's user info (``amqp://user:PASSWORD@host``).
_URL_PASSWORD = re.compile(r"(://[^:/@\s]*:)[^@\s]*@")
#: A quoted value in a client library's error (librdkafka: ``Invalid value "hunter2" for …``).
_QUOTED_VALUE = re.compile(r'(?i)(value\s*)"[^"]*"')


class ConfigError(ValueError):
    """Invalid user input; the message is one line naming the bad field."""


class StageConfig(BaseModel):
    """Base for every stage's config: frozen, unknown keys rejected."""

    model_config = ConfigDict(extra="forbid", frozen=True)


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


def section(document: Mapping[str, Any], name: str) -> dict[str, Any]:
    """One stage's section of the root YAML document."""
    value = document.get(name, {}) or {}
    if not isinstance(value, dict):
        raise ConfigError(f"{name}: must be a mapping")
    return dict(value)


def build(
    model: type[M],
    values: Mapping[str, Any],
    overrides: Mapping[str, Any] | None = None,
    *,
    prefix: str = "",
) -> M:
    """Validate ``values`` updated with the non-None ``overrides`` (flags win over YAML)."""
    merged = dict(values)
    merged.update({k: v for k, v in (overrides or {}).items() if v is not None})
    try:
        return model.model_validate(merged)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "config"
        if prefix:
            where = f"{prefix}.{where}"
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = "unknown key"
        got = err.get("input")
        shown = (
            f" (got {redact_url(repr(got))})"
            if err["type"] != "extra_forbidden"
            and got is not None
            and repr(got) not in msg
            and not is_secret_path(where)
            else ""
        )
        if is_secret_path(where):
            if got is not None and str(got):
                msg = msg.replace(repr(got), "<redacted>").replace(str(got), "<redacted>")
            msg = redact(msg)
        raise ConfigError(f"{where}: {msg}{shown}") from None


def is_secret_path(where: str) -> bool:
    """Whether a dotted config path may hold a secret: client settings or a secret-named key."""
    parts = where.split(".")
    return bool(CLIENT_SECTIONS & set(parts)) or any(SECRET_NAME.search(p) for p in parts)


def redact_url(text: str) -> str:
    """``text`` with the password of every URL in it hidden (the user and host name the fix)."""
    return _URL_PASSWORD.sub(r"\1<redacted>@", text)


def redact(text: str) -> str:
    """A client library's message with every quoted value hidden (keys stay: they name the fix)."""
    return _QUOTED_VALUE.sub(lambda m: f'{m.group(1)}"<redacted>"', text)


#: Kafka's own rule for topic names (legal characters, at most 249 of them).
_TOPIC_NAME = re.compile(r"[A-Za-z0-9._-]{1,249}")


def kafka_topic_name(value: str) -> str:
    """A topic name Kafka accepts; anything else would only fail later, at the broker."""
    if not _TOPIC_NAME.fullmatch(value) or value in (".", ".."):
        raise ValueError("must be a Kafka topic name: 1-249 of A-Z a-z 0-9 . _ -")
    return value


def tcp_port(value: int, zero: str) -> int:
    """A TCP port number; ``zero`` says what port 0 means for this setting."""
    if not 0 <= value <= 65535:
        raise ValueError(f"must be a TCP port (0 {zero})")
    return value


def check_port_free(host: str, port: int, field: str = "metrics-port") -> None:
    """Fail now, before any connection, if a /metrics server could not bind ``host:port``."""
    import socket

    if port == 0:
        return
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the servers themselves do
        try:
            s.bind((host, port))
        except OverflowError:
            raise ConfigError(f"{field}: must be a TCP port (got {port})") from None
        except OSError as exc:
            raise ConfigError(
                f"{field}: cannot listen on {host}:{port} ({exc.strerror}); "
                "pick another port, or 0 for any free port"
            ) from None


def resolve_secret(value: str) -> str:
    """``value`` with an ``env:VAR`` or ``file:PATH`` reference resolved (anything else as is).

    An unset variable or an unreadable file is a ConfigError that shows the variable name or the
    file path, never a secret.
    """
    import os

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
