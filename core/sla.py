"""The SLA file: latency, max, loss and liveness objectives that ``nines alerts`` turns into rules.

Durations are written as users write them (``50ms``, ``2m``, ``30d``) and held as seconds.
Validation goes through :func:`core.config.build`, so a bad file is one line naming the field.
"""

from __future__ import annotations

import math
import re
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, ValidationInfo, field_validator, model_validator

from core.alert_template import template_error
from core.config import ConfigError, StageConfig, build
from core.hdr import REPORTED_QUANTILES
from core.units import format_duration, parse_duration_s
from core.windows import DEFAULT_WINDOWS, WindowSpec

#: ``le`` boundaries (seconds) of ``nines_latency_classic_seconds``: 1-2.5-5 steps, 100 µs to
#: 1 h. The SLA owns them (burn-rate thresholds must be one of them); the exporter renders them.
BUCKET_BOUNDARIES_S: tuple[float, ...] = (
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
    1.0, 2.5, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0, 1000.0, 2500.0, 3600.0,
)  # fmt: skip

#: Burn-rate alerts need the longest window (3d) to fit in the SLO period.
MIN_SLO_PERIOD_S = 3 * 86400.0

_NAME = re.compile(r"[a-z0-9][a-z0-9_-]*")


def _seconds(value: Any) -> float:
    """Parse a user duration; PromQL needs whole milliseconds."""
    if value is None:
        raise ValueError("duration required")
    seconds = parse_duration_s(value)
    if abs(seconds * 1000 - round(seconds * 1000)) > 1e-6:
        raise ValueError("must be a whole number of milliseconds")
    return seconds


def _positive_seconds(value: Any) -> float:
    """A duration that must be above zero (windows, thresholds)."""
    seconds = _seconds(value)
    if seconds <= 0:
        raise ValueError("must be above zero")
    return seconds


Seconds = Annotated[float, BeforeValidator(_seconds)]
PositiveSeconds = Annotated[float, BeforeValidator(_positive_seconds)]


def _alert_template(value: str | None, objective: str | None = None) -> str | None:
    """An annotation Prometheus will parse as a Go template; it refuses a rules file with one
    that does not (every alert of the file stops), so the SLA refuses it first."""
    if value is None:
        return value
    why = template_error(value)
    if why is not None:
        whose = f"objective {objective!r}: " if objective else ""
        raise ValueError(
            f"{whose}not a template Prometheus can parse ({why}); Prometheus would refuse the "
            "whole rules file (write {{ and }} as {{ `{{` }} and {{ `}}` }} for literal braces)"
        )
    return value


def bucket_boundary(seconds: float) -> float | None:
    """The exporter's ``le`` boundary equal to ``seconds`` (within float noise), else None."""
    for boundary in BUCKET_BOUNDARIES_S:
        if math.isclose(seconds, boundary, rel_tol=1e-9, abs_tol=0.0):
            return boundary
    return None


class Objective(StageConfig):
    """One objective on the series matched by cluster/topic/partition (omitted = all)."""

    name: str
    cluster: str | None = None
    topic: str | None = None
    partition: str | None = None
    kind: Literal["e2e", "publish", "send_lag"] = "e2e"
    window: PositiveSeconds = 60.0
    quantile: float | None = None
    objective: float | None = None
    slo_period: PositiveSeconds = 30 * 86400.0
    threshold: PositiveSeconds | None = None
    max: PositiveSeconds | None = None
    loss_ratio: float | None = None
    no_echoes_for: PositiveSeconds | None = None
    for_: Seconds = Field(default=0.0, alias="for")
    severity: Literal["page", "ticket"] = "page"
    summary: str | None = None
    runbook_url: str | None = None

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not _NAME.fullmatch(value):
            raise ValueError("use lower-case letters, digits, '-' and '_'")
        return value

    @field_validator("summary", "runbook_url")
    @classmethod
    def _template(cls, value: str | None, info: ValidationInfo) -> str | None:
        return _alert_template(value, info.data.get("name"))

    @field_validator("partition", mode="before")
    @classmethod
    def _partition(cls, value: Any) -> Any:
        if isinstance(value, int) and not isinstance(value, bool):
            return str(value)
        if value == "all":
            raise ValueError("omit partition for the merge of all partitions")
        return value

    @field_validator("quantile")
    @classmethod
    def _quantile(cls, value: float | None) -> float | None:
        if value is None:
            return value
        if not 0 < value < 1:
            raise ValueError("must be above 0 and below 1")
        if not any(math.isclose(value, q) for q in REPORTED_QUANTILES):
            shown = ", ".join(str(q) for q in REPORTED_QUANTILES)
            raise ValueError(f"the stream job exports only quantiles {shown}")
        return value

    @field_validator("objective")
    @classmethod
    def _objective(cls, value: float | None) -> float | None:
        if value is not None and not 0 < value < 1:
            raise ValueError("must be above 0 and below 1 (e.g. 0.999 for 99.9 %)")
        return value

    @field_validator("slo_period")
    @classmethod
    def _slo_period(cls, value: float) -> float:
        if value < MIN_SLO_PERIOD_S:
            raise ValueError("must be at least 3d (the longest burn-rate window)")
        return value

    @field_validator("threshold")
    @classmethod
    def _threshold(cls, value: float | None, info: ValidationInfo) -> float | None:
        if value is None or info.data.get("objective") is None:
            return value
        boundary = bucket_boundary(value)
        if boundary is None:
            shown = ", ".join(f"{b:g}s" for b in BUCKET_BOUNDARIES_S)
            raise ValueError(
                f"burn-rate alerts (objective set) need a histogram bucket boundary: {shown}"
            )
        return boundary

    @field_validator("loss_ratio")
    @classmethod
    def _loss_ratio(cls, value: float | None) -> float | None:
        if value is not None and not 0 <= value < 1:
            raise ValueError("must be at least 0 and below 1 (e.g. 0.001 for 0.1 %)")
        return value

    @model_validator(mode="after")
    def _exactly_one(self) -> Objective:
        chosen = [
            key
            for key, value in (
                ("quantile", self.quantile),
                ("max", self.max),
                ("loss_ratio", self.loss_ratio),
                ("no_echoes_for", self.no_echoes_for),
            )
            if value is not None
        ]
        if len(chosen) != 1:
            raise ValueError(
                "set exactly one of quantile (+ threshold), max, loss_ratio, no_echoes_for"
                + (f", not {' and '.join(chosen)}" if chosen else "")
            )
        if (self.quantile is None) != (self.threshold is None):
            raise ValueError("quantile and threshold go together")
        if self.objective is not None and self.quantile is None:
            raise ValueError("objective (burn-rate SLO) needs a latency objective")
        counter_based = self.loss_ratio is not None or self.no_echoes_for is not None
        if counter_based and "kind" in self.model_fields_set:
            raise ValueError("kind applies to latency and max objectives only")
        return self

    @property
    def kind_of_objective(self) -> Literal["latency", "max", "loss_ratio", "no_echoes"]:
        """Which of the four objective types this is."""
        if self.quantile is not None:
            return "latency"
        if self.max is not None:
            return "max"
        if self.loss_ratio is not None:
            return "loss_ratio"
        return "no_echoes"


class SlaConfig(StageConfig):
    """A whole SLA file: the objectives and the guards that apply to all of them."""

    windows: tuple[str, ...] = DEFAULT_WINDOWS.names  # what the stream job exports by default
    probe_hiccup_max: PositiveSeconds | None = None
    stream_stale_after: PositiveSeconds = 120.0
    runbook_url: str | None = None
    objectives: tuple[Objective, ...] = Field(min_length=1)

    @field_validator("runbook_url")
    @classmethod
    def _runbook(cls, value: str | None) -> str | None:
        return _alert_template(value)

    @field_validator("windows")
    @classmethod
    def _windows(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if not value:
            raise ValueError("list at least one resolution")
        for w in value:
            _positive_seconds(w)
        return WindowSpec.from_names(value).names  # the stream job's own rules, finest first

    @property
    def finest_window(self) -> str:
        """The shortest exported resolution, used for the hiccup guard on burn-rate alerts."""
        return WindowSpec.from_names(self.windows).finest


def parse_sla(document: dict[str, Any]) -> SlaConfig:
    """Validate an SLA mapping; errors become one-line ``ConfigError``s naming the field."""
    sla = build(SlaConfig, document)
    names = [o.name for o in sla.objectives]
    for i, objective in enumerate(sla.objectives):
        if names.index(objective.name) != i:
            raise ConfigError(f"objectives.{i}.name: duplicate name {objective.name!r}")
        window = format_duration(objective.window)
        if objective.kind_of_objective in ("latency", "max") and window not in sla.windows:
            raise ConfigError(
                f"objectives.{i}.window: {window} is not a resolution the stream job exports "
                f"({', '.join(sla.windows)}; set windows: to match it)"
            )
    return sla
