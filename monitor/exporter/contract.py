"""The stream exporter's metric contract: every family's name, help, type and labels.

What docs/metrics.md lists for ``nines stream`` (tests/unit/exporter/
test_metrics_md_lists_the_contract.py holds the two together), written once: the encoders
(``text``, ``protobuf``, ``samples``) read names, help and labels from here and add none. The
small families (window ends, series counts, pipeline health, the held peak's hold) are built here
as prometheus_client metric families, which both formats write.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from core.windows import SeriesKey

SERIES_LABELS = ["cluster", "topic", "partition", "kind"]
TOPIC_LABELS = ["cluster", "topic", "partition"]
#: Labels of a per-broker rollup: the send-time leader instead of the partition.
BROKER_LABELS = ["cluster", "topic", "broker", "kind"]

#: The per-window gauge families, in exposition order: (name, help, attribute of WindowLines).
WINDOW_FAMILIES: tuple[tuple[str, str, str], ...] = (
    (
        "nines_latency_seconds",
        "Quantile of the latest closed window's HDR histogram (only with >= 1/(1-q) samples).",
        "quantiles",
    ),
    ("nines_latency_max_seconds", "Exact max of the latest closed window.", "max"),
    (
        "nines_latency_peak_seconds",
        "Largest exact max of the windows that closed in the last peak_hold, never below the "
        "latest's: every window's max reaches a scraper.",
        "peak",
    ),
    (
        "nines_latency_peak_quantile_seconds",
        "Largest quantile of the windows that closed in the last peak_hold, each read from its "
        "own HDR histogram (only with >= 1/(1-q) samples); never an average.",
        "quantile_peaks",
    ),
    ("nines_latency_window_samples", "Samples in the latest closed window.", "samples"),
    ("nines_latency_window_lost", "Lost messages in the latest closed window.", "lost"),
)
#: The same gauges per broker (``nines_broker_…``): separate families, so that a query on
#: ``partition="all"`` keeps matching exactly one series per topic.
BROKER_WINDOW_FAMILIES: tuple[tuple[str, str, str], ...] = (
    (
        "nines_broker_latency_seconds",
        "Quantile of the latest closed window's HDR histogram of the messages a broker led at "
        "send time (only with >= 1/(1-q) samples).",
        "quantiles",
    ),
    (
        "nines_broker_latency_max_seconds",
        "Exact max of the latest closed window of the messages a broker led at send time.",
        "max",
    ),
    (
        "nines_broker_latency_peak_seconds",
        "Largest exact max of the windows that closed in the last peak_hold, of the messages a "
        "broker led at send time.",
        "peak",
    ),
    (
        "nines_broker_latency_peak_quantile_seconds",
        "Largest quantile of the windows that closed in the last peak_hold, of the messages a "
        "broker led at send time (only with >= 1/(1-q) samples).",
        "quantile_peaks",
    ),
    (
        "nines_broker_latency_window_samples",
        "Samples in the latest closed window of the messages a broker led at send time.",
        "samples",
    ),
    (
        "nines_broker_latency_window_lost",
        "Lost messages in the latest closed window of those a broker led at send time.",
        "lost",
    ),
)
#: A per-window family's attribute → its index in a chunk (``WINDOW_FAMILIES`` order).
FAMILY_ATTRS: tuple[str, ...] = tuple(attr for _, _, attr in WINDOW_FAMILIES)

HISTOGRAM = "nines_latency_classic_seconds"
HISTOGRAM_HELP = "Latency of every closed window of the finest resolution, cumulative since start."
#: The same samples as a native histogram (its own family: a Prometheus with native histograms on
#: ingests only the native form of a family that has both, and the burn-rate rules read ``le``).
NATIVE = "nines_latency_native_seconds"
NATIVE_HELP = (
    "Latency of every closed window of the finest resolution, cumulative since start, as a native "
    "histogram (HDR buckets re-binned; protobuf scrapes only, text shows count and sum)."
)

#: Counter (a ``StreamCounters`` field) → its values by what they concern, as the exporter keeps
#: them: its own copy, never the job's type.
CounterValues = Mapping[str, Mapping[Any, int]]
#: StreamCounters field → (counter family, help, labels), in exposition order; every field of
#: ``COUNTER_FIELDS`` has one (a unit test holds them together).
COUNTER_FAMILIES: dict[str, tuple[str, str, list[str]]] = {
    "echoes": ("nines_echoes", "Echoes counted in closed windows.", TOPIC_LABELS),
    "lost": ("nines_lost", "Echoes of lost probe messages.", TOPIC_LABELS),
    "late": ("nines_late_echoes", "Echoes behind the watermark.", TOPIC_LABELS),
    "bad": (
        "nines_bad_echoes",
        "Echo records counted and skipped, by reason (malformed, future, series_cap).",
        ["reason"],
    ),
    "overflow": (
        "nines_latency_overflow",
        "Samples above the histogram's highest trackable value.",
        SERIES_LABELS,
    ),
    "data_loss": (
        "nines_data_loss_offsets",
        "Echo topic offsets that vanished before the job read them.",
        ["topic", "partition"],
    ),
    "offsets_reset": (
        "nines_offsets_reset",
        "Times the echo topic's offsets went back under the job (deleted and recreated, or "
        "truncated); the records of the old log it had not read are unknown.",
        ["topic", "partition"],
    ),
    "systems": (
        "nines_system_echoes",
        "Echoes counted in closed windows, by the system probed (kafka, nats, redis, rabbitmq).",
        ["cluster", "system"],
    ),
}

#: Pipeline health gauge (``nines_stream_<name>``) → help, in exposition order.
HEALTH_DOCS: dict[str, str] = {
    "batch_duration_seconds": "Duration of the last micro-batch.",
    "input_rows_per_second": "Rows per second into the last micro-batch (partial histograms).",
    "watermark_lag_seconds": "Now minus the event-time watermark.",
    "state_rows": "Rows in Spark's aggregation state.",
    "last_batch_timestamp_seconds": "When the last micro-batch finished.",
}

GAUGE = "gauge"
COUNTER = "counter"
#: The label-free and per-resolution families beside the above: name (a counter's without
#: ``_total``) → (help, type, labels).
SMALL_FAMILIES: dict[str, tuple[str, str, list[str]]] = {
    "nines_latency_window_end_timestamp_seconds": (
        "End of the latest closed window of each resolution.",
        GAUGE,
        ["window"],
    ),
    "nines_series": ("Distinct (cluster, topic, partition or broker) series exported.", GAUGE, []),
    "nines_series_limit": ("The max_series cap.", GAUGE, []),
    "nines_series_rejected": (
        "Closed windows of new series refused because max_series was reached.",
        COUNTER,
        [],
    ),
    "nines_series_evicted": (
        "Series windows removed from /metrics after series_ttl_windows without a closed window.",
        COUNTER,
        [],
    ),
    "nines_stream_batches": ("Micro-batches completed.", COUNTER, []),
    "nines_peak_hold_seconds": (
        "How long nines_latency_peak_seconds holds a window's max (stream peak_hold).",
        GAUGE,
        [],
    ),
    "nines_scrape_gaps": (
        "Scrapes that came more than peak_hold after the same scraper's previous one: window "
        "maxima in between may be unseen.",
        COUNTER,
        [],
    ),
}


def series_key(s: SeriesKey) -> tuple[str, str, str, str]:
    """The series' label values in exposition order (cluster, topic, partition or broker,
    kind): its sort order in every family."""
    return (s.cluster, s.topic, s.partition, s.kind)


def series_labels(s: SeriesKey) -> dict[str, str]:
    """A series' label names → values (``BROKER_LABELS`` for a broker rollup)."""
    if s.is_broker:
        return dict(zip(BROKER_LABELS, (s.cluster, s.topic, s.broker, s.kind), strict=True))
    return dict(zip(SERIES_LABELS, series_key(s), strict=True))


def family_names(s: SeriesKey) -> dict[str, str]:
    """A per-window family's attribute → the family name its line carries for this series."""
    return {attr: f for f, _, attr in (BROKER_WINDOW_FAMILIES if s.is_broker else WINDOW_FAMILIES)}


def label_values(key: Any) -> tuple[str, ...]:
    """A counter sample's key (a series, a reason, a (topic, partition)…) as label values."""
    if isinstance(key, SeriesKey):
        return series_key(key)
    if isinstance(key, str):
        return (key,)
    return tuple(str(k) for k in key)


def counter_order(key: Any) -> Any:
    """A counter sample's sort key within its family."""
    return series_key(key) if isinstance(key, SeriesKey) else key


def _small(name: str, **kw: Any) -> Any:
    doc, kind, labels = SMALL_FAMILIES[name]
    family = GaugeMetricFamily if kind == GAUGE else CounterMetricFamily
    return family(name, doc, labels=labels or None, **kw)


def window_end_family(window_end_us: Mapping[str, int]) -> Any:
    """End of the latest closed window of each resolution."""
    end = _small("nines_latency_window_end_timestamp_seconds")
    for res, end_us in sorted(window_end_us.items()):
        end.add_metric([res], end_us / 1e6)
    return end


def counter_families(counters: CounterValues) -> Iterable[Any]:
    """One counter family per counter (cumulative since the exporter started)."""
    for attr, (name, doc, labels) in COUNTER_FAMILIES.items():
        fam = CounterMetricFamily(name, doc, labels=labels)
        values = counters[attr]
        for k in sorted(values, key=counter_order):
            fam.add_metric(list(label_values(k)), values[k])
        yield fam


def series_families(kept: int, limit: int, rejected: int, evicted: int) -> Iterable[Any]:
    """The exporter's cardinality: series kept, the cap, and what the cap and the TTL removed."""
    yield _small("nines_series", value=kept)
    yield _small("nines_series_limit", value=limit)
    yield _small("nines_series_rejected", value=rejected)
    yield _small("nines_series_evicted", value=evicted)


def health_families(health: Mapping[str, float], batches: int) -> Iterable[Any]:
    """Micro-batches completed and the last one's health gauges (those recorded)."""
    yield _small("nines_stream_batches", value=batches)
    for name, doc in HEALTH_DOCS.items():
        if name in health:
            yield GaugeMetricFamily(f"nines_stream_{name}", doc, value=health[name])


def scrape_families(peak_hold_s: float, gaps: int) -> Iterable[Any]:
    """The held peak's hold, and the scrapes that came later than it."""
    yield _small("nines_peak_hold_seconds", value=peak_hold_s)
    yield _small("nines_scrape_gaps", value=gaps)
