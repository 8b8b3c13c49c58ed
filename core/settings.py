"""A setting's one home: its default, help line and unit live on the stage's model field.

``setting`` declares such a field; ``add_flags`` turns chosen fields into argparse flags whose
help ends with the default as users write it (``2m``, ``10s,1m,1h``), and ``flag_values`` reads
them back for ``core.config.build``. The docs and the chart are checked against
``default_text`` (tests/unit/test_settings_defaults.py), so no default is written twice.
"""

from __future__ import annotations

import argparse
import typing
from collections.abc import Iterable
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator
from pydantic_core import PydanticUndefined

from core.config import StageConfig
from core.units import format_duration, parse_duration_s

#: How a setting's value is written by users: ``duration`` (seconds, shown as ``2m``), ``size``
#: (bytes), or None (as is).
Unit = Literal["duration", "size"]


def positive_seconds(value: Any) -> float:
    """A duration setting (``2m``, ``500ms``, a number of seconds) that must be > 0."""
    seconds = parse_duration_s(value)
    if seconds <= 0:
        raise ValueError("must be > 0")
    return seconds


def seconds_fields(*names: str) -> Any:
    """The validator of a model's duration fields (``positive_seconds``), one for every stage.

    A field validator, not an Annotated type: it runs before ``StageConfig``'s plain-value
    check, so ``watermark: true`` says ``not a duration``. Give it a name unique in the model's
    bases (a composed model keeps one validator per name).
    """

    def check(cls: type, value: Any) -> float:
        return positive_seconds(value)

    return field_validator(*names, mode="before")(classmethod(check))


def setting(
    default: Any = PydanticUndefined,
    *,
    help: str,
    unit: Unit | None = None,
    default_text: str | None = None,
    note: str | None = None,
    choices: bool = False,
    **field: Any,
) -> Any:
    """A model field with the help line its flag shows.

    ``default_text`` replaces the written default where the value is computed (``host-pid``);
    ``note`` follows the default in the help (``0 = any``); ``choices`` makes a Literal field's
    flag refuse other values itself.
    """
    extra = {"unit": unit, "default_text": default_text, "note": note, "choices": choices}
    return Field(
        default,
        description=help,
        json_schema_extra={k: v for k, v in extra.items() if v},
        **field,
    )


def _extra(model: type[BaseModel], name: str) -> dict[str, Any]:
    extra = model.model_fields[name].json_schema_extra
    return dict(extra) if isinstance(extra, dict) else {}


def format_value(value: Any, unit: str | None = None) -> str:
    """A value as users write it in YAML or on the command line."""
    if isinstance(value, bool):
        return str(value).lower()
    if unit == "duration" and isinstance(value, int | float):
        return format_duration(value)
    if isinstance(value, tuple | list):
        return ",".join(str(v) for v in value)
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def default_text(model: type[BaseModel], name: str) -> str | None:
    """The default of field ``name`` as users write it; None when it has none to show."""
    field = model.model_fields[name]
    extra = _extra(model, name)
    if extra.get("default_text"):
        return str(extra["default_text"])
    if field.default_factory in (dict, list):
        return "{}" if field.default_factory is dict else "[]"
    if field.is_required() or field.default_factory is not None or field.default is None:
        return None
    return format_value(field.default, extra.get("unit"))


def flag(name: str) -> str:
    """The flag of a field: ``echo_topic`` → ``--echo-topic``."""
    return "--" + name.replace("_", "-")


def _is_bool(annotation: Any) -> bool:
    return annotation is bool or (
        typing.get_origin(annotation) is not None
        and bool in typing.get_args(annotation)
        and all(a in (bool, type(None)) for a in typing.get_args(annotation))
    )


def add_flags(
    parser: argparse.ArgumentParser, model: type[BaseModel], names: Iterable[str]
) -> None:
    """One flag per field of ``names``, in that order, with the model's help, default and unit.

    A flag left out is None, so the YAML value or the model's default applies (``build``).
    """
    for name in names:
        field = model.model_fields[name]
        extra = _extra(model, name)
        help_text = field.description or ""
        if _is_bool(field.annotation):
            parser.add_argument(flag(name), action="store_true", default=None, help=help_text)
            continue
        shown = default_text(model, name)
        notes = "; ".join(x for x in (f"default {shown}" if shown else "", extra.get("note")) if x)
        kwargs: dict[str, Any] = {"help": f"{help_text} ({notes})" if notes else help_text}
        if field.annotation is int and not extra.get("unit"):
            kwargs["type"] = int
        if extra.get("choices"):
            kwargs["choices"] = typing.get_args(field.annotation)
        parser.add_argument(flag(name), **kwargs)


def flag_values(args: argparse.Namespace, names: Iterable[str]) -> dict[str, Any]:
    """The flags ``add_flags`` added, by field name (None where not given)."""
    return {name: getattr(args, name) for name in names}


class SeriesCapConfig(StageConfig):
    """``max_series``: one key, two caps (Spark's state and /metrics), so one home for both.

    The stream's and the exporter's models both inherit it, and the ``stream:`` section, which
    composes them, has the key once.
    """

    #: Distinct (cluster, topic, partition) series: 10,000 probe partitions plus their topics'
    #: merged series, the brokers' and the probes' own (hiccup) rows, with 20 % headroom.
    max_series: int = setting(
        12_000, ge=1, help="distinct (cluster, topic, partition) series kept; beyond, refused"
    )


__all__ = [
    "SeriesCapConfig",
    "Unit",
    "add_flags",
    "default_text",
    "flag",
    "flag_values",
    "format_value",
    "positive_seconds",
    "seconds_fields",
    "setting",
]
