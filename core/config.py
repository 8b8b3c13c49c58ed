"""Configuration plumbing: YAML + flags into frozen, validated per-stage models.

Each stage owns its model (``probes.config``, ``streaming.config``, ``testbroker.config``);
this module applies flag overrides to the YAML's values and turns validation errors into one
line that names the field, which the CLI prints before exiting with status 2. Pure: reading the
file, resolving secrets and trying a port are ``runtime.config_io``'s.
"""

from __future__ import annotations

import difflib
import math
import re
import types
import typing
from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError, ValidationInfo, field_validator

from core.redact import REDACTED, redact_text, remember_url
from core.units import MAX_NUMBER, describe

M = TypeVar("M", bound=BaseModel)

#: A setting whose name says it holds a secret; its value is never shown in a message.
SECRET_NAME = re.compile(r"pass|secret|token|credential|private|key|jaas|sasl|auth|cert", re.I)
#: Sections that pass client settings through (librdkafka's): no value of theirs is ever shown.
CLIENT_SECTIONS = frozenset({"kafka"})
#: The top-level sections of the one YAML file every stage reads (each command reads its own and
#: refuses any name outside this union: a mistyped ``prob:`` must not leave the probe on defaults).
SECTIONS = ("broker", "probe", "stream")


class ConfigError(ValueError):
    """Invalid user input; the message is one line naming the bad field."""


class StageConfig(BaseModel):
    """Base for every stage's config: frozen, unknown keys rejected, wrong YAML types refused."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    @field_validator("*", mode="before")
    @classmethod
    def _plain_value(cls, value: Any, info: ValidationInfo) -> Any:
        field = cls.model_fields.get(info.field_name or "")
        return check_plain(value, field.annotation if field else Any)


def _accepts(annotation: Any, kinds: tuple[type, ...]) -> bool:
    """Whether a field's type admits a value of one of ``kinds`` (Any and unions looked into)."""
    if annotation is Any or annotation in kinds:
        return True
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _accepts(typing.get_args(annotation)[0], kinds)
    if origin is typing.Union or origin is types.UnionType:
        return any(_accepts(a, kinds) for a in typing.get_args(annotation))
    if origin is typing.Literal:
        return any(isinstance(a, kinds) for a in typing.get_args(annotation))
    return False


def check_plain(value: Any, annotation: Any) -> Any:
    """``value`` unless YAML gave a number field what no setting means: a boolean (pydantic would
    read ``true`` as 1), ``.inf``/``.nan``, or a number beyond any setting (2**63). One check for
    every number field of every stage; other types pydantic refuses itself."""
    if not _accepts(annotation, (int, float)):
        return value
    if isinstance(value, bool):
        if not _accepts(annotation, (bool,)):
            raise ValueError("must be a number, not true/false")
    elif isinstance(value, float) and not math.isfinite(value):
        raise ValueError("must be a finite number")
    elif isinstance(value, int | float) and abs(value) >= MAX_NUMBER:
        raise ValueError("out of range")
    return value


def _known_keys(model: type[BaseModel], loc: tuple[int | str, ...]) -> list[str]:
    """The keys a nested model at ``loc`` (a pydantic error location) accepts."""
    current: Any = model
    for part in loc:
        if isinstance(part, int):
            continue
        if not (isinstance(current, type) and issubclass(current, BaseModel)):
            return []
        field = current.model_fields.get(str(part))
        if field is None:
            return []
        current = _model_in(field.annotation)
    if not (isinstance(current, type) and issubclass(current, BaseModel)):
        return []
    return [f.alias or name for name, f in current.model_fields.items()]


def _model_in(annotation: Any) -> Any:
    """The BaseModel inside an annotation such as ``Model | None`` or ``tuple[Model, ...]``."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        found = _model_in(arg)
        if found is not None:
            return found
    return None


def did_you_mean(word: str, known: list[str] | tuple[str, ...]) -> str:
    """`` (did you mean 'rate'?)`` for the closest of ``known``, or ``""``."""
    close = difflib.get_close_matches(word, list(known), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def section(document: Mapping[str, Any], name: str) -> dict[str, Any]:
    """One stage's section of the root YAML document; any section no stage knows is an error."""
    for key in document:
        if key not in SECTIONS:
            raise ConfigError(
                f"{describe(key) if not isinstance(key, str) else key}: unknown section"
                f"{did_you_mean(str(key), SECTIONS)}; the sections are {', '.join(SECTIONS)}"
            )
    value = document.get(name, {})
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ConfigError(f"{name}: must be a mapping (got {describe(value)})")
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
        raise ConfigError(error_line(model, exc.errors()[0], prefix)) from None


def error_line(model: type[BaseModel], err: Any, prefix: str = "") -> str:
    """One pydantic error as the one line the CLI prints: ``field.path: what is wrong (got x)``.

    The input is shown only when it is one plain value outside a secret-named setting: a
    mapping or a list is only named (a model-level error's input is the whole section, secrets
    and all), and the line passes through the redactor."""
    loc = tuple(err["loc"])
    where = ".".join(str(p) for p in loc) or "config"
    where = f"{prefix}.{where}" if prefix else where
    msg = err["msg"].removeprefix("Value error, ")
    got = err.get("input")
    if isinstance(got, str):
        remember_url(got)  # a URL's password is quoted back whatever characters it holds
    if err["type"] == "extra_forbidden":
        known = _known_keys(model, loc[:-1])
        return f"{where}: unknown key{did_you_mean(str(loc[-1]), known)}"
    if is_secret_path(where):
        if isinstance(got, str | int | float) and str(got):
            msg = msg.replace(repr(got), REDACTED).replace(str(got), REDACTED)
        return f"{where}: {redact_text(msg)}"
    shown = ""
    if loc and err["type"] != "missing" and not isinstance(got, BaseModel):
        text = describe(got)  # a mapping or list is named, never quoted (a section holds secrets)
        if redact_text(text) not in redact_text(msg) and repr(got) not in msg:
            shown = f" (got {text})"
    return redact_text(f"{where}: {msg}{shown}")


def is_secret_path(where: str) -> bool:
    """Whether a dotted config path may hold a secret: client settings or a secret-named key."""
    parts = where.split(".")
    return bool(CLIENT_SECTIONS & set(parts)) or any(SECRET_NAME.search(p) for p in parts)


#: Kafka's own rule for topic names (legal characters, at most 249 of them).
_TOPIC_NAME = re.compile(r"[A-Za-z0-9._-]{1,249}")


def kafka_topic_name(value: str) -> str:
    """A topic name Kafka accepts; anything else would only fail later, at the broker."""
    if not _TOPIC_NAME.fullmatch(value) or value in (".", ".."):
        raise ValueError("must be a Kafka topic name: 1-249 of A-Z a-z 0-9 . _ -")
    return value


def kafka_bootstrap(value: str) -> str:
    """A Kafka ``host:port[,host:port...]`` list: no URL, and no credentials in it (those belong in
    ``kafka: {sasl.username, sasl.password}``, where they are never shown)."""
    if not value.strip():
        raise ValueError("must not be empty: a Kafka host:port list")
    if "@" in value:
        for part in (value, *value.split(",")):
            remember_url(part if "://" in part else f"kafka://{part}")
        raise ValueError(
            "a Kafka host:port list holds no credentials: set kafka: sasl.username and "
            "sasl.password (env:VAR or file:PATH keep them out of the file)"
        )
    if "://" in value:
        raise ValueError("must be a Kafka host:port list, not a URL")
    return value


def label(value: str) -> str:
    """A label value (cluster, probe id): empty would merge series that should stay apart."""
    if not value.strip():
        raise ValueError("must not be empty (it is a label of every series)")
    return value


def tcp_port(value: int, zero: str) -> int:
    """A TCP port number; ``zero`` says what port 0 means for this setting."""
    if not 0 <= value <= 65535:
        raise ValueError(f"must be a TCP port (0 {zero})")
    return value
