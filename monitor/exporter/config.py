"""The exporter's settings: how long peaks are held, how many series, which histograms, where.

They are written in the ``stream:`` section (the exporter serves the stream job's windows), which
``monitor.pipeline.PipelineConfig`` composes from this model and ``streaming.config.StreamConfig``;
each default is written here, once.
"""

from __future__ import annotations

from pydantic import field_validator

from core.config import tcp_port
from core.settings import SeriesCapConfig, seconds_fields, setting
from monitor.exporter.native import MAX_SCHEMA, MIN_SCHEMA


class ExporterConfig(SeriesCapConfig):
    """What /metrics keeps and for how long (``max_series`` is shared with Spark's state), and
    where it is served."""

    metrics_host: str = setting("127.0.0.1", help="exporter address")
    metrics_port: int = setting(9464, help="exporter port", note="0 = any")
    #: exporter-toolkit web config for /metrics (TLS, basic auth); None: plain HTTP
    web_config_file: str | None = setting(
        None, help="TLS and basic auth for /metrics, in Prometheus exporter-toolkit's format"
    )

    #: Windows of its resolution a series may go without a closed one before leaving /metrics.
    series_ttl_windows: int = setting(
        6, ge=1, help="windows without a closed one before a series leaves /metrics"
    )
    #: Cumulative histograms per probe partition; False: per topic (``partition="all"``), a
    #: third of the scrape at 10,000 partitions (docs/metrics.md, scrape cost).
    partition_histograms: bool = setting(
        False, help="nines_latency_classic_seconds per probe partition, not per topic"
    )
    #: How long ``nines_latency_peak_seconds`` holds a window's max after it closed: longer than
    #: any scrape interval (Prometheus' default is 1m), so a window that closes between scrapes
    #: still has its max seen.
    peak_hold: float = setting(
        120.0, unit="duration", help="how long nines_latency_peak_seconds holds a window's max"
    )
    #: The native histogram's schema while a series fits ``native_max_buckets``: 8, the finest,
    #: puts buckets 2^(1/256) apart (0.271 % wide).
    native_schema: int = setting(
        MAX_SCHEMA,
        ge=MIN_SCHEMA,
        le=MAX_SCHEMA,
        help="schema of nines_latency_native_seconds (-4..8; 8: buckets 0.271 % wide)",
    )
    #: Buckets a native series may hold before its schema is made coarser (OpenTelemetry's
    #: default exponential-histogram size; Prometheus' ``native_histogram_bucket_limit`` does
    #: the same).
    native_max_buckets: int = setting(
        160, ge=1, help="buckets of a native series before its schema is made coarser"
    )

    _exporter_seconds = seconds_fields("peak_hold")

    @field_validator("metrics_port")
    @classmethod
    def _port(cls, v: int) -> int:
        return tcp_port(v, zero="= any free port")

    @property
    def scrape_gap_s(self) -> float:
        """A scrape this long after the same scraper's previous one is a gap: a window's held
        max may have expired unseen in between (the hold, ``peak_hold``)."""
        return self.peak_hold

    @property
    def prerender_within_s(self) -> float:
        """A format is pre-rendered while some scraper asked for it within this long: the hold,
        ``peak_hold``, longer than any scrape interval."""
        return self.peak_hold


__all__ = ["ExporterConfig"]
