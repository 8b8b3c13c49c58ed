"""The /metrics body in the Prometheus text format (0.0.4), and in the delimited protobuf format
(``core.promproto``) for a scraper that asks for it: what a scrape of the exporter returns.

The small families (window ends, series counts, pipeline health) are prometheus_client metric
families written by its ``generate_latest``. The per-window gauges, the cumulative histogram and
the counters are rendered by hand, for speed: with 10,200 series × 3 resolutions, building metric
families on every scrape took 5.7 s per scrape (label validation and quantile reads for 476k
samples); rendering a closed window's lines once, when it arrives, and joining text per scrape
took 0.4 s (commit a121808). At 10,000 probe partitions (90,180 windows) that join, the histogram
and the counters took 2.2 s of CPU; with each resolution's lines joined once per change, a
histogram series rendered when a window adds to it, and counters written by hand, a scrape right
after a batch takes 0.43 s including gzip (docs/benchmarks.md, scrape cost). The hand-written
lines are checked byte for byte against prometheus_client's rendering (tests/unit/exporter).
Nothing here reads a quantile from anything but a (merged) histogram.

The protobuf body is built the same way: a closed window's Metric messages are encoded once,
beside its lines, and joined per family; a family's length prefix is the sum of its parts. One
thing differs: a resolution's quantile gauges are joined in order of their value, not of their
series. A latency in seconds is 8 incompressible bytes as a protobuf double (a few digits as text),
but HDR reports few distinct values (8,400 among 105,000 quantiles of 10 s windows at 10,000
partitions), so in value order equal doubles follow each other and gzip sends each value about
once. At 10,000 partitions that took the quantile family from 4.9 to 3.3 MB gzipped, the
protobuf scrape from 6.6 to 5.0 MB at the same level (bench.cardinality); the max gauges are
exact (nearly all distinct) and stay in series order, which compresses their labels best. A
family's metrics have no order in the format, and Prometheus keys every series by its labels.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from prometheus_client import generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.utils import floatToGoString

from core import promproto
from core.hdr import min_samples_for
from core.windows import SeriesKey, WindowHistogram
from monitor.exporter.hold import Values
from monitor.exporter.native import ZERO_THRESHOLD_S, NativeBuckets
from streaming.counters import StreamCounters

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

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
HISTOGRAM = "nines_latency_classic_seconds"
HISTOGRAM_HELP = "Latency of every closed window of the finest resolution, cumulative since start."
#: The same samples as a native histogram (its own family: a Prometheus with native histograms on
#: ingests only the native form of a family that has both, and the burn-rate rules read ``le``).
NATIVE = "nines_latency_native_seconds"
NATIVE_HELP = (
    "Latency of every closed window of the finest resolution, cumulative since start, as a native "
    "histogram (HDR buckets re-binned; protobuf scrapes only, text shows count and sum)."
)

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


@dataclass(frozen=True, slots=True)
class WindowProto:
    """A closed window's protobuf Metric messages, one ``bytes`` per family (encoded once); the
    quantile gauges one message each, with their sort keys, to be joined in value order."""

    quantiles: tuple[bytes, ...]
    max: bytes
    samples: bytes
    lost: bytes
    peak: bytes = b""
    quantile_peaks: bytes = b""
    #: ``value_key`` of each of ``quantiles``
    quantile_keys: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class WindowLines:
    """A closed window's exposition lines, one string per family (rendered once), and the same
    as protobuf messages (``pb``)."""

    quantiles: str
    max: str
    samples: str
    lost: str
    #: the held peak's lines (max, quantiles); they change while the window stays the latest
    peak: str = ""
    quantile_peaks: str = ""
    pb: WindowProto = WindowProto((), b"", b"", b"")


def series_key(s: SeriesKey) -> tuple[str, str, str, str]:
    """The series' label values in ``SERIES_LABELS`` order (also its sort order)."""
    return (s.cluster, s.topic, s.partition, s.kind)


def _escape(value: str) -> str:
    """A label value as the text format wants it."""
    return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")


def _labels(pairs: Mapping[str, str], extra: str | None = None) -> str:
    """``name="value",…`` sorted by name, as prometheus_client writes them.

    With ``extra`` (a label whose value varies per line: ``q``, ``le``) the result is a
    ``str.format`` template with ``{}`` in that label's place.
    """
    if extra is None:
        return ",".join(f'{n}="{_escape(pairs[n])}"' for n in sorted(pairs))
    fixed = {n: _escape(v).replace("{", "{{").replace("}", "}}") for n, v in pairs.items()}
    fixed[extra] = "{}"
    return ",".join(f'{n}="{fixed[n]}"' for n in sorted(fixed))


def _series_pairs(s: SeriesKey) -> dict[str, str]:
    if s.is_broker:
        return dict(zip(BROKER_LABELS, (s.cluster, s.topic, s.broker, s.kind), strict=True))
    return dict(zip(SERIES_LABELS, series_key(s), strict=True))


def _family_names(s: SeriesKey) -> dict[str, str]:
    """WindowLines attribute → the family name its line carries for this series."""
    return {attr: f for f, _, attr in (BROKER_WINDOW_FAMILIES if s.is_broker else WINDOW_FAMILIES)}


def window_values(w: WindowHistogram, quantiles: Sequence[float]) -> Values:
    """The window's exact max, then each quantile of its histogram (None where the window holds
    fewer than 1/(1-q) samples): what its lines show and what a held peak keeps."""
    total = w.hist.total
    supported = [q for q in quantiles if total >= min_samples_for(q)]
    read = iter(w.hist.values_at_quantiles(supported))
    quantile_values = [next(read) if total >= min_samples_for(q) else None for q in quantiles]
    return (w.hist.max_us, *quantile_values)


def _value_lines(name: str, lv: str, lq: str, values: Values, quantile_texts: Sequence[str]) -> str:
    """One line per quantile that has a value."""
    return "".join(
        f"{name}{{{lq.format(qt)}}} {floatToGoString(v / 1e6)}\n"
        for qt, v in zip(quantile_texts, values[1:], strict=True)
        if v is not None
    )


@functools.lru_cache(maxsize=64)
def _q_label(q_text: str) -> bytes:
    return promproto.label("q", q_text)


def _pb_labels(pairs: Mapping[str, str]) -> tuple[bytes, bytes]:
    """The series' label fields sorted by name, split where ``q`` goes (before, after)."""
    return (
        promproto.labels({k: v for k, v in pairs.items() if k < "q"}),
        promproto.labels({k: v for k, v in pairs.items() if k > "q"}),
    )


def _value_pb(pb: tuple[bytes, bytes], values: Values, quantile_texts: Sequence[str]) -> bytes:
    """One gauge message per quantile that has a value."""
    return b"".join(_value_messages(pb, values, quantile_texts)[0])


def value_key(value_us: int, rank: int) -> int:
    """A quantile gauge's place in its resolution's protobuf chunk: by value, then quantile."""
    return value_us * 64 + rank


def _value_messages(
    pb: tuple[bytes, bytes], values: Values, quantile_texts: Sequence[str]
) -> tuple[tuple[bytes, ...], tuple[int, ...]]:
    """``_value_pb``'s messages one by one, and their ``value_key``."""
    before, after = pb
    had = [
        (promproto.gauge(before + _q_label(qt) + after, v / 1e6), value_key(v, rank))
        for rank, (qt, v) in enumerate(zip(quantile_texts, values[1:], strict=True))
        if v is not None
    ]
    return tuple(m for m, _ in had), tuple(k for _, k in had)


def peak_lines(
    s: SeriesKey, resolution: str, peak: Values, quantile_texts: Sequence[str]
) -> tuple[str, str, bytes, bytes]:
    """The series' held peak lines at one resolution: the max's, and the quantiles', as text
    and as protobuf messages."""
    name = _family_names(s)
    pairs = {**_series_pairs(s), "window": resolution}
    lv, lq = _labels(pairs), _labels(pairs, extra="q")
    pb = _pb_labels(pairs)
    max_us = peak[0]
    assert max_us is not None
    return (
        f"{name['peak']}{{{lv}}} {floatToGoString(max_us / 1e6)}\n",
        _value_lines(name["quantile_peaks"], lv, lq, peak, quantile_texts),
        promproto.gauge(pb[0] + pb[1], max_us / 1e6),
        _value_pb(pb, peak, quantile_texts),
    )


def render_window(
    w: WindowHistogram,
    quantile_texts: Sequence[str],
    values: Values,
    peak: Values | None = None,
) -> WindowLines:
    """The window's lines for each per-window family from its ``window_values``; held-peak
    lines only with ``peak`` (the series holds one)."""
    s = w.series
    name = _family_names(s)
    pairs = {**_series_pairs(s), "window": w.resolution}
    lv, lq = _labels(pairs), _labels(pairs, extra="q")
    held = (
        peak_lines(s, w.resolution, peak, quantile_texts)
        if peak is not None
        else ("", "", b"", b"")
    )
    pb = _pb_labels(pairs)
    plain = pb[0] + pb[1]
    quantile_messages, quantile_keys = _value_messages(pb, values, quantile_texts)
    return WindowLines(
        _value_lines(name["quantiles"], lv, lq, values, quantile_texts),
        f"{name['max']}{{{lv}}} {floatToGoString(w.hist.max_us / 1e6)}\n",
        f"{name['samples']}{{{lv}}} {floatToGoString(w.hist.total)}\n",
        f"{name['lost']}{{{lv}}} {floatToGoString(w.lost)}\n" if s.kind == "e2e" else "",
        held[0],
        held[1],
        WindowProto(
            quantile_messages,
            promproto.gauge(plain, w.hist.max_us / 1e6),
            promproto.gauge(plain, w.hist.total),
            promproto.gauge(plain, w.lost) if s.kind == "e2e" else b"",
            held[2],
            held[3],
            quantile_keys,
        ),
    )


def window_chunk(
    lines: Sequence[WindowLines], families: Sequence[tuple[str, str, str]] = WINDOW_FAMILIES
) -> tuple[bytes, ...]:
    """Windows' pre-rendered lines joined per family (``families`` order), for one resolution:
    a resolution whose windows did not change keeps its chunk between scrapes."""
    return tuple("".join([getattr(w, attr) for w in lines]).encode() for _, _, attr in families)


def window_pb_chunk(
    lines: Sequence[WindowLines], families: Sequence[tuple[str, str, str]] = WINDOW_FAMILIES
) -> tuple[bytes, ...]:
    """``window_chunk`` of the protobuf messages, the quantile gauges in value order."""
    return tuple(
        by_value(lines) if attr == "quantiles" else b"".join([getattr(w.pb, attr) for w in lines])
        for _, _, attr in families
    )


def by_value(lines: Sequence[WindowLines]) -> bytes:
    """The windows' quantile gauge messages joined in ``value_key`` order (see the module's
    docstring: equal doubles next to each other is what gzip can shorten)."""
    messages = [m for w in lines for m in w.pb.quantiles]
    keys = np.fromiter(
        (k for w in lines for k in w.pb.quantile_keys), dtype=np.int64, count=len(messages)
    )
    return b"".join([messages[i] for i in np.argsort(keys, kind="stable").tolist()])


def window_pb(
    chunks: Sequence[tuple[bytes, ...]],
    families: Sequence[tuple[str, str, str]] = WINDOW_FAMILIES,
) -> list[bytes]:
    """The per-window gauge families as delimited MetricFamily messages (unjoined)."""
    parts: list[bytes] = []
    for i, (name, doc, _) in enumerate(families):
        head = promproto.family_head(name, doc, promproto.GAUGE)
        parts += promproto.family(head, [chunk[i] for chunk in chunks])
    return parts


def window_text(
    chunks: Sequence[tuple[bytes, ...]],
    families: Sequence[tuple[str, str, str]] = WINDOW_FAMILIES,
) -> list[bytes]:
    """The per-window gauge families from resolutions' chunks, in the given order (unjoined:
    ``body`` copies the 70 MB once)."""
    parts = []
    for i, (name, doc, _) in enumerate(families):
        parts.append(f"# HELP {name} {doc}\n# TYPE {name} gauge\n".encode())
        parts.extend(chunk[i] for chunk in chunks)
    return parts


def histogram_lines(
    s: SeriesKey, les: Sequence[str], buckets: Sequence[int], total: int, sum_s: float
) -> str:
    """One series' cumulative ``le`` buckets, count and sum, rendered when a window adds to them."""
    pairs = _series_pairs(s)
    lv, ll = _labels(pairs), _labels(pairs, extra="le")
    out = [
        f"{HISTOGRAM}_bucket{{{ll.format(le)}}} {floatToGoString(c)}\n"
        for le, c in zip(les, buckets, strict=True)
    ]
    out.append(f"{HISTOGRAM}_bucket{{{ll.format('+Inf')}}} {floatToGoString(total)}\n")
    out.append(f"{HISTOGRAM}_count{{{lv}}} {floatToGoString(total)}\n")
    out.append(f"{HISTOGRAM}_sum{{{lv}}} {floatToGoString(sum_s)}\n")
    return "".join(out)


def histogram_pb(
    s: SeriesKey, le_seconds: Sequence[float], buckets: Sequence[int], total: int, sum_s: float
) -> bytes:
    """``histogram_lines`` as one classic histogram message."""
    return promproto.classic_histogram(
        promproto.labels(_series_pairs(s)), total, sum_s, le_seconds, buckets
    )


def native_lines(s: SeriesKey, total: int, sum_s: float) -> str:
    """A native series in the text format: only its count and sum (the text format has no
    native buckets; client_golang writes a native-only histogram the same way)."""
    pairs = _series_pairs(s)
    lv, ll = _labels(pairs), _labels(pairs, extra="le")
    return (
        f"{NATIVE}_bucket{{{ll.format('+Inf')}}} {floatToGoString(total)}\n"
        f"{NATIVE}_count{{{lv}}} {floatToGoString(total)}\n"
        f"{NATIVE}_sum{{{lv}}} {floatToGoString(sum_s)}\n"
    )


def native_pb(s: SeriesKey, buckets: NativeBuckets, total: int, sum_s: float) -> bytes:
    """One native histogram message of the series' re-binned buckets."""
    spans, deltas = buckets.spans_and_deltas()
    return promproto.native_histogram(
        promproto.labels(_series_pairs(s)),
        total,
        sum_s,
        buckets.schema,
        ZERO_THRESHOLD_S,
        buckets.zero_count,
        spans,
        deltas,
    )


def histogram_text(lines: Sequence[str], name: str = HISTOGRAM, doc: str = HISTOGRAM_HELP) -> str:
    """A histogram family from its series' pre-rendered lines, in the given order."""
    return f"# HELP {name} {doc}\n# TYPE {name} histogram\n" + "".join(lines)


def histogram_family_pb(
    messages: Sequence[bytes], name: str = HISTOGRAM, doc: str = HISTOGRAM_HELP
) -> list[bytes]:
    """A histogram family from its series' pre-encoded messages."""
    return promproto.family(promproto.family_head(name, doc, promproto.HISTOGRAM), messages)


def window_end_family(window_end_us: Mapping[str, int]) -> Any:
    """End of the latest closed window of each resolution."""
    end = GaugeMetricFamily(
        "nines_latency_window_end_timestamp_seconds",
        "End of the latest closed window of each resolution.",
        labels=["window"],
    )
    for res, end_us in sorted(window_end_us.items()):
        end.add_metric([res], end_us / 1e6)
    return end


def _label_values(key: Any) -> tuple[str, ...]:
    if isinstance(key, SeriesKey):
        return series_key(key)
    if isinstance(key, str):
        return (key,)
    return tuple(str(k) for k in key)


def _counter_order(key: Any) -> Any:
    return series_key(key) if isinstance(key, SeriesKey) else key


def counter_families(counters: StreamCounters) -> Iterable[Any]:
    """One counter family per StreamCounters field (cumulative since the exporter started)."""
    for attr, (name, doc, labels) in COUNTER_FAMILIES.items():
        fam = CounterMetricFamily(name, doc, labels=labels)
        values: Mapping[Any, int] = getattr(counters, attr)
        for k in sorted(values, key=_counter_order):
            fam.add_metric(list(_label_values(k)), values[k])
        yield fam


@functools.lru_cache(maxsize=1 << 16)  # bounded; 10,000 partitions need 20,000 entries
def _counter_head(attr: str, key: Any) -> str:
    """``name_total{labels}`` of one counter sample: its labels do not change between scrapes."""
    name, _, labels = COUNTER_FAMILIES[attr]
    return f"{name}_total{{{_labels(dict(zip(labels, _label_values(key), strict=True)))}}}"


def counter_text(counters: StreamCounters) -> str:
    """``counter_families`` as ``generate_latest`` writes them, by hand: at 10,000 partitions its
    label checks took 0.2 s per scrape for the 20,000 echo and loss counters."""
    out = []
    for attr, (name, doc, _) in COUNTER_FAMILIES.items():
        out.append(f"# HELP {name}_total {doc}\n# TYPE {name}_total counter\n")
        values: Mapping[Any, int] = getattr(counters, attr)
        for k in sorted(values, key=_counter_order):
            out.append(f"{_counter_head(attr, k)} {floatToGoString(values[k])}\n")
    return "".join(out)


@functools.lru_cache(maxsize=1 << 16)
def _counter_labels(attr: str, key: Any) -> bytes:
    _, _, labels = COUNTER_FAMILIES[attr]
    return promproto.labels(dict(zip(labels, _label_values(key), strict=True)))


def counter_pb(counters: StreamCounters) -> list[bytes]:
    """``counter_text`` as delimited MetricFamily messages."""
    out: list[bytes] = []
    for attr, (name, doc, _) in COUNTER_FAMILIES.items():
        values: Mapping[Any, int] = getattr(counters, attr)
        metrics = [
            promproto.counter(_counter_labels(attr, k), values[k])
            for k in sorted(values, key=_counter_order)
        ]
        out += promproto.family(
            promproto.family_head(f"{name}_total", doc, promproto.COUNTER), metrics
        )
    return out


def series_families(kept: int, limit: int, rejected: int, evicted: int) -> Iterable[Any]:
    """The exporter's cardinality: series kept, the cap, and what the cap and the TTL removed."""
    yield GaugeMetricFamily(
        "nines_series",
        "Distinct (cluster, topic, partition or broker) series exported.",
        value=kept,
    )
    yield GaugeMetricFamily("nines_series_limit", "The max_series cap.", value=limit)
    yield CounterMetricFamily(
        "nines_series_rejected",
        "Closed windows of new series refused because max_series was reached.",
        value=rejected,
    )
    yield CounterMetricFamily(
        "nines_series_evicted",
        "Series windows removed from /metrics after series_ttl_windows without a closed window.",
        value=evicted,
    )


def health_families(health: Mapping[str, float], batches: int) -> Iterable[Any]:
    """Micro-batches completed and the last one's health gauges (those recorded)."""
    yield CounterMetricFamily("nines_stream_batches", "Micro-batches completed.", value=batches)
    for name, doc in HEALTH_DOCS.items():
        if name in health:
            yield GaugeMetricFamily(f"nines_stream_{name}", doc, value=health[name])


def scrape_families(peak_hold_s: float, gaps: int) -> Iterable[Any]:
    """The held peak's hold, and the scrapes that came later than it."""
    yield GaugeMetricFamily(
        "nines_peak_hold_seconds",
        "How long nines_latency_peak_seconds holds a window's max (stream peak_hold).",
        value=peak_hold_s,
    )
    yield CounterMetricFamily(
        "nines_scrape_gaps",
        "Scrapes that came more than peak_hold after the same scraper's previous one: window "
        "maxima in between may be unseen.",
        value=gaps,
    )


class _Families:
    """What ``generate_latest`` needs: something with ``collect()``."""

    def __init__(self, families: list[Any]) -> None:
        self.families = families

    def collect(self) -> list[Any]:
        return self.families


def body(
    windows: Sequence[bytes], window_end: Any, histogram: str, counters: str, rest: Sequence[Any]
) -> list[bytes]:
    """The whole body, in parts: window gauges, window ends, the histograms, counters, then the
    rest (unjoined: a resolution's chunk that did not change is the same part as before, and
    the server keeps its compression; ``core.gzip_parts``)."""
    head = generate_latest(_Families([window_end]))
    tail = generate_latest(_Families(list(rest)))
    return [*windows, head, histogram.encode(), counters.encode(), tail]


def body_pb(
    windows: Sequence[bytes],
    window_end: Any,
    histograms: Sequence[bytes],
    counters: Sequence[bytes],
    rest: Sequence[Any],
) -> list[bytes]:
    """``body`` in the delimited protobuf format, families in the same order."""
    head = promproto.encode_families([window_end])
    tail = promproto.encode_families(rest)
    return [*windows, head, b"".join((*histograms, *counters)), tail]
