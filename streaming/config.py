"""Stream job configuration: typed, frozen, validated, with defaults."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from core.config import StageConfig
from core.units import format_duration, parse_duration_s


class StreamConfig(StageConfig):
    """Where echoes come from, which windows to keep, and where results go."""

    bootstrap: str
    echo_topic: str = "nines.echoes"
    windows: tuple[str, ...] = ("10s", "1m", "1h")
    watermark: float = 120.0
    #: An echo whose intended time is further ahead of its Kafka timestamp is bad (``future``).
    max_clock_skew: float = 300.0
    digits: int = 3
    lowest_us: int = 1
    highest: float = 3600.0
    checkpoint: str | None = None
    archive: str | None = None
    metrics_host: str = "127.0.0.1"
    metrics_port: int = 9464
    trigger: float = 5.0
    source: Literal["python", "kafka"] = "python"
    starting_offsets: Literal["latest", "earliest"] = "latest"
    master: str = "local[*]"
    max_records_per_batch: int = 1_000_000
    shuffle_partitions: int = 4
    state_store: Literal["rocksdb", "memory"] = "rocksdb"
    kafka: dict[str, str] = Field(default_factory=dict)

    @field_validator("windows", mode="before")
    @classmethod
    def _windows(cls, v: Any) -> tuple[str, ...]:
        items = v.split(",") if isinstance(v, str) else list(v)
        seconds = sorted({parse_duration_s(str(x).strip()) for x in items if str(x).strip()})
        if not seconds:
            raise ValueError("need at least one window")
        finest = seconds[0]
        if finest < 1 or not float(finest).is_integer():
            raise ValueError("windows must be whole seconds, at least 1s")
        for s in seconds:
            if s % finest:
                raise ValueError(f"every window must be a multiple of the finest ({finest:g}s)")
        return tuple(format_duration(s) for s in seconds)

    @field_validator("watermark", "highest", "trigger", "max_clock_skew", mode="before")
    @classmethod
    def _duration(cls, v: Any) -> float:
        seconds = parse_duration_s(v)
        if seconds <= 0:
            raise ValueError("must be > 0")
        return seconds

    @field_validator("digits")
    @classmethod
    def _digits(cls, v: int) -> int:
        if not 1 <= v <= 4:
            raise ValueError("must be 1..4 significant digits")
        return v

    @field_validator("metrics_port")
    @classmethod
    def _port(cls, v: int) -> int:
        if not 0 <= v <= 65535:
            raise ValueError("must be a TCP port (0 = any free port)")
        return v

    @field_validator("max_records_per_batch")
    @classmethod
    def _max_records(cls, v: int) -> int:
        if v < 1:
            raise ValueError("must be >= 1")
        return v

    @model_validator(mode="after")
    def _range(self) -> StreamConfig:
        if self.highest * 1e6 < 2 * self.lowest_us:
            raise ValueError("highest must be at least twice lowest_us")
        return self

    @property
    def window_seconds(self) -> dict[str, int]:
        """Resolution label → seconds."""
        return {w: int(parse_duration_s(w)) for w in self.windows}

    @property
    def finest_us(self) -> int:
        """Span of the finest window in microseconds."""
        return min(self.window_seconds.values()) * 1_000_000
