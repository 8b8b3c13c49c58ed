"""Stream job configuration: typed, frozen, validated, with defaults."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import PrivateAttr, field_validator, model_validator

from core.config import kafka_bootstrap, kafka_topic_name
from core.echo import DEFAULT_ECHO_TOPIC
from core.hdr import HdrLayout, LayoutError
from core.kafka_conf import KafkaAuthConfig, StreamKafka
from core.settings import SeriesCapConfig, seconds_fields, setting
from core.units import parse_duration_s, parse_size_bytes
from core.windows import DEFAULT_WINDOWS, WindowSpec

#: Spark master URLs Spark itself accepts (anything else fails only when the JVM starts).
SPARK_MASTER = re.compile(r"local(\[(\*|[1-9]\d*)(,[1-9]\d*)?\])?|(spark|k8s)://\S+|yarn")
#: One ``HOST:PORT`` of a ``spark://`` master (a standalone master; several: ZooKeeper HA).
_HOST = r"(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?)"
_PORT = r"([1-9]\d{0,3}|[1-5]\d{4}|6[0-4]\d{3}|65[0-4]\d{2}|655[0-2]\d|6553[0-5])"
SPARK_STANDALONE = re.compile(rf"spark://{_HOST}:{_PORT}(,{_HOST}:{_PORT})*")
#: ``k8s://`` and the API server's URL (``https://`` when no scheme is given).
SPARK_K8S = re.compile(rf"k8s://(https?://)?{_HOST}(:{_PORT})?/?")
#: Spark's processing-time trigger counts whole milliseconds: less would become 0 (no pause).
MIN_TRIGGER_S = 0.001


class StreamConfig(SeriesCapConfig, KafkaAuthConfig):
    """Where echoes come from, which windows to keep, and where results go.

    ``max_series`` (inherited) also bounds the series admitted into Spark's state; the
    exporter's settings of the same ``stream:`` section are ``monitor.exporter.config``'s.
    """

    bootstrap: str = setting(help="Kafka bootstrap servers of the echo topic")
    echo_topic: str = setting(DEFAULT_ECHO_TOPIC, help="echo topic")
    windows: tuple[str, ...] = setting(
        DEFAULT_WINDOWS.names, help="resolutions, finest first multiple"
    )
    watermark: float = setting(120.0, unit="duration", help="allowed lateness on the intended time")
    #: An echo whose intended time is further ahead of its Kafka timestamp is bad (``future``).
    max_clock_skew: float = setting(
        300.0, unit="duration", help="an echo further ahead of its Kafka timestamp is bad"
    )
    digits: int = setting(3, help="HDR significant digits 1..4")
    lowest_us: int = setting(1, ge=1, help="lowest latency the histograms tell apart, in µs")
    highest: float = setting(3600.0, unit="duration", help="highest latency the histograms hold")
    checkpoint: str | None = setting(
        None, default_text="temp dir", help="checkpoint directory (exactly-once restarts)"
    )
    archive: str | None = setting(None, help="write every closed window's histogram here (Parquet)")
    # -- archive lifecycle (streaming/archive.py; docs/configuration.md) --
    #: Whole dates of the archive older than this are removed. 35 days: the default
    #: ``nines slo --since 30d``, a 31-day month and a few days' grace to run the report.
    archive_retention: float = setting(
        35 * 86_400.0, unit="duration", help="whole dates of the archive older than this go"
    )
    #: Merge a closed hour's per-batch files into one file (24 a day per resolution).
    archive_compact: bool = setting(True, help="merge a closed hour's files into one")
    #: Also remove the oldest whole dates while the archive is larger than this (bytes; None:
    #: no cap). Disk use grows with the probe partitions, the retention does not.
    archive_max_size: int | None = setting(
        None, unit="size", help="oldest whole dates go while the archive is larger"
    )

    @field_validator("archive_retention", mode="before")
    @classmethod
    def _archive_retention(cls, v: Any) -> float:
        if isinstance(v, bool) or not isinstance(v, str | int | float):
            raise ValueError("not a duration (use e.g. 35d, 720h)")
        seconds = parse_duration_s(v)
        if not 0 < seconds < float("inf"):
            raise ValueError("must be > 0 and finite")
        return seconds

    @field_validator("archive_max_size", mode="before")
    @classmethod
    def _archive_max_size(cls, v: Any) -> int | None:
        if v is None:
            return None
        if not isinstance(v, str | int) or isinstance(v, bool):
            raise ValueError("not a size (use e.g. 8GiB)")
        size = parse_size_bytes(v)
        if size <= 0:
            raise ValueError("must be > 0 (or null: no cap)")
        return size

    # -- end archive lifecycle --
    trigger: float = setting(5.0, unit="duration", help="micro-batch interval")
    starting_offsets: Literal["latest", "earliest"] = setting(
        "latest", choices=True, help="where a first start begins"
    )
    master: str = setting("local[*]", help="Spark master")
    max_records_per_batch: int = setting(1_000_000, ge=1, help="bound on one micro-batch")
    shuffle_partitions: int = setting(4, ge=1, help="Spark shuffle partitions")
    state_store: Literal["rocksdb", "memory"] = setting("rocksdb", help="Spark state store")
    #: The JVM's JIT: C1 only. Spark's JVM sees ~74 partial-histogram rows a micro-batch
    #: whatever the echoes, so its CPU is per-batch machinery (planning, scheduling, state
    #: commits) that C2 keeps recompiling for minutes: at 1,500 echoes/s with the 5 s trigger
    #: the JVM took 0.2 of a core with C2 and 0.08 with C1 only, and 400 k-echo batches got
    #: faster too (docs/benchmarks.md, bench.stages).
    jvm_options: str = setting(
        "-XX:TieredStopAtLevel=1",
        help="JVM flags of Spark's driver and executors (C1 JIT only: cheaper per micro-batch)",
    )
    #: Spark's stderr has one line per error and no Java trace (streaming/jvm_log.py); this file
    #: gets every event with its trace, rolled at 16 MiB, two files kept. Empty: no file.
    spark_log: str = setting(
        "",
        default_text="none",
        help="file for Spark's log with Java traces (stderr: one line per error)",
    )
    kafka: StreamKafka = setting(
        default_factory=dict, help="librdkafka settings for the echo consumer"
    )
    _spec: WindowSpec = PrivateAttr(default=DEFAULT_WINDOWS)
    _layout: HdrLayout = PrivateAttr(default_factory=HdrLayout)

    @field_validator("windows", mode="before")
    @classmethod
    def _windows(cls, v: Any) -> tuple[str, ...]:
        if isinstance(v, list | tuple):
            if not all(isinstance(w, str | int | float) for w in v):
                raise ValueError("must be a list of durations, e.g. [10s, 1m, 1h]")
            return WindowSpec.from_names([str(w) for w in v]).names
        if not isinstance(v, str):
            raise ValueError("must be a list of durations, e.g. [10s, 1m, 1h]")
        return WindowSpec.from_names(v).names

    _stream_seconds = seconds_fields("watermark", "highest", "trigger", "max_clock_skew")

    @field_validator("trigger")
    @classmethod
    def _trigger(cls, v: float) -> float:
        if v < MIN_TRIGGER_S:
            raise ValueError("must be at least 1ms (Spark's trigger counts whole milliseconds)")
        return v

    @field_validator("jvm_options")
    @classmethod
    def _jvm_options(cls, v: str) -> str:
        bad = [o for o in v.split() if not o.startswith("-")]
        if bad:
            raise ValueError(f"each JVM flag starts with '-' (got {bad[0]!r})")
        return v

    @field_validator("spark_log")
    @classmethod
    def _spark_log(cls, v: str) -> str:
        if v != v.strip() or any(not c.isprintable() for c in v):
            raise ValueError("a file path without control characters or edge spaces")
        return v

    @field_validator("echo_topic")
    @classmethod
    def _topic(cls, v: str) -> str:
        return kafka_topic_name(v)

    @field_validator("bootstrap")
    @classmethod
    def _bootstrap(cls, v: str) -> str:
        return kafka_bootstrap(v)

    @field_validator("master")
    @classmethod
    def _master(cls, v: str) -> str:
        if v and not SPARK_MASTER.fullmatch(v):
            raise ValueError(
                "must be local, local[N], local[*], local[N,F], spark://…, k8s://…, yarn, "
                "or empty (spark-submit chooses)"
            )
        if v.startswith("spark://") and not SPARK_STANDALONE.fullmatch(v):
            raise ValueError("a standalone master is spark://HOST:PORT[,HOST:PORT...]")
        if v.startswith("k8s://") and not SPARK_K8S.fullmatch(v):
            raise ValueError("a Kubernetes master is k8s://[https://]HOST[:PORT]")
        return v

    @field_validator("digits")
    @classmethod
    def _digits(cls, v: int) -> int:
        try:
            HdrLayout(digits=v)  # the layout owns the rule; the field is named here
        except LayoutError as exc:
            raise ValueError(exc.reason) from None
        return v

    @model_validator(mode="after")
    def _build(self) -> StreamConfig:
        # ``highest`` is written in seconds, ``lowest_us`` in µs: converted once, here
        try:
            self._layout = HdrLayout(self.lowest_us, int(self.highest * 1e6), self.digits)
        except LayoutError as exc:
            raise ValueError(f"{exc.field.replace('highest_us', 'highest')} {exc.reason}") from None
        self._spec = WindowSpec.from_names(self.windows)
        return self

    @property
    def spec(self) -> WindowSpec:
        """The windows, parsed once: handed to the source, the query and the exporter."""
        return self._spec

    @property
    def layout(self) -> HdrLayout:
        """The histograms' bucket layout, built once from ``digits``, ``lowest_us``, ``highest``."""
        return self._layout

    @property
    def finest_us(self) -> int:
        """Span of the finest window in microseconds."""
        return self._spec.finest_us
