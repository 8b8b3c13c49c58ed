"""The /metrics body in the Prometheus text format (0.0.4), and in the delimited protobuf format
(``core.promproto``) for a scraper that asks for it: what a scrape of the exporter returns.

The small families (window ends, series counts, pipeline health) are prometheus_client metric
families written by its ``generate_latest``. The per-window gauges, the cumulative histogram and
the counters are rendered by hand, for speed: with 10,200 series × 3 resolutions, building metric
families on every scrape took 5.7 s per scrape (label validation and quantile reads for 476k
samples). Rendering each closed window's lines when it arrived then cost 3 s of CPU per batch of
10 s windows at 10,000 probe partitions (30,060 windows, every one re-rendered though a scrape
shows only the latest), and a scrape after the 10 s and 1 m windows 0.5-0.6 s. Now a window's
numbers are kept (``table``) and a scrape encodes each resolution that changed, in one pass: a
(series, quantile) sample's label set never changes, so its prefix (the text line up to the
value, the protobuf Metric up to its double) is encoded once per series (``series_prefixes``)
and joined with the values, each distinct value formatted once (HDR reports few), doubles
packed by numpy. That scrape takes 0.3-0.4 s including gzip (docs/benchmarks.md, scrape cost).
The hand-written lines are checked byte for byte against prometheus_client's rendering
(tests/unit/exporter). Nothing here reads a quantile from anything but a (merged) histogram.

The protobuf body is built the same way, a family's length prefix the sum of its parts. One
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
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from prometheus_client import generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.utils import floatToGoString

from core import promproto
from core.windows import ALL_PARTITIONS, SeriesKey
from monitor.exporter.native import ZERO_THRESHOLD_S, NativeBuckets
from monitor.exporter.table import ABSENT, series_key

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
    """A per-window family's attribute → the family name its line carries for this series."""
    return {attr: f for f, _, attr in (BROKER_WINDOW_FAMILIES if s.is_broker else WINDOW_FAMILIES)}


I64 = npt.NDArray[np.int64]
#: A per-window family's attribute → its index in a chunk (``WINDOW_FAMILIES`` order).
FAMILY_ATTRS: tuple[str, ...] = tuple(attr for _, _, attr in WINDOW_FAMILIES)
#: Value encodings kept per distinct value (HDR reports few: 8,400 among 105,000 quantiles of
#: 10 s windows at 10,000 partitions); let go at this size (exact maxima are all distinct).
MAX_CACHED_VALUES = 1 << 17


class _Encoded(dict[int, Any]):
    """int → its encoding, computed on first use."""

    def __init__(self, encode: Callable[[int], Any]) -> None:
        super().__init__()
        self._encode = encode

    def __missing__(self, value: int) -> Any:
        out = self[value] = self._encode(value)
        return out


#: A latency in µs as text (seconds, the line's end); a count the same.
_SECONDS_TEXT = _Encoded(lambda us: f"{floatToGoString(us / 1e6)}\n".encode())
_COUNT_TEXT = _Encoded(lambda n: f"{floatToGoString(n)}\n".encode())
#: Below this, ``floatToGoString`` is ``repr``: from 1e6 on it writes an exponent, as Go's
#: clients do, where ``repr`` does not (tests/unit/exporter/test_exposition_values.py).
_REPR_BELOW = 1e6


def _cached_text(cache: _Encoded, values: npt.NDArray[np.int64]) -> list[bytes]:
    """Values that repeat (HDR's quantiles, sample counts), each formatted once."""
    if len(cache) > MAX_CACHED_VALUES:
        cache.clear()
    return list(map(cache.__getitem__, values.tolist()))


def go_texts(values: npt.NDArray[np.float64]) -> list[bytes]:
    """``floatToGoString`` of each value and a newline (values that rarely repeat: exact maxima,
    counters), without its per-value checks where ``repr`` is the same."""
    if values.size and values.min() >= 0 and values.max() < _REPR_BELOW:
        return [f"{v!r}\n".encode() for v in values.tolist()]
    return [f"{floatToGoString(v)}\n".encode() for v in values.tolist()]


def pb_doubles(values: npt.NDArray[Any]) -> list[bytes]:
    """Each value as a protobuf double (8 bytes, little-endian), in one numpy pass."""
    return values.astype("<f8").view("V8").tolist()  # type: ignore[no-any-return]


@dataclass(frozen=True, slots=True)
class Prefixes:
    """One series' samples at one resolution, everything but the value, per family
    (``FAMILY_ATTRS``): text up to the space before the value, protobuf up to the double
    (``\\x22``, length, labels, gauge tag). A label set never changes, only its value does."""

    quantiles: tuple[Any, ...]
    max: Any
    peak: Any
    quantile_peaks: tuple[Any, ...]
    samples: Any
    lost: Any


def series_prefixes(
    s: SeriesKey, resolution: str, quantile_texts: Sequence[str], fmt: str, held: bool
) -> Prefixes:
    """The series' ``Prefixes`` in ``fmt`` (``"text"`` or ``"protobuf"``, as bytes); the held
    peak's only if the series holds one (``held``), ``lost`` only for e2e series (else None)."""
    name = _family_names(s)
    pairs = {**_series_pairs(s), "window": resolution}
    e2e = s.kind == "e2e"
    none = (None,) * len(quantile_texts)
    if fmt == "text":
        lv, lq = _labels(pairs), _labels(pairs, extra="q")
        return Prefixes(
            tuple(f"{name['quantiles']}{{{lq.format(qt)}}} ".encode() for qt in quantile_texts),
            f"{name['max']}{{{lv}}} ".encode(),
            f"{name['peak']}{{{lv}}} ".encode() if held else None,
            tuple(f"{name['quantile_peaks']}{{{lq.format(qt)}}} ".encode() for qt in quantile_texts)
            if held
            else none,
            f"{name['samples']}{{{lv}}} ".encode(),
            f"{name['lost']}{{{lv}}} ".encode() if e2e else None,
        )
    # a family's name is in its head: the held peak's samples carry the same labels
    before = promproto.labels({k: v for k, v in pairs.items() if k < "q"})
    after = promproto.labels({k: v for k, v in pairs.items() if k > "q"})
    plain = promproto.gauge_prefix(before + after)
    quantiles = tuple(
        promproto.gauge_prefix(before + _q_label(qt) + after) for qt in quantile_texts
    )
    return Prefixes(
        quantiles,
        plain,
        plain if held else None,
        quantiles if held else none,
        plain,
        plain if e2e else None,
    )


@functools.lru_cache(maxsize=64)
def _q_label(q_text: str) -> bytes:
    return promproto.label("q", q_text)


class PrefixTable:
    """One group's ``Prefixes`` in exposition order (a resolution's partition and topic series, or
    its broker rollups), as object arrays (rows × quantiles for the quantile families), so that a
    scrape picks the present samples' prefixes in one step. A prefix is encoded when a sample
    first needs it (``ensure``): a 10 s window rarely has the p99.99 a 1 h window has, and at
    10,000 partitions the unused ones would be a third of the quantile prefixes' memory."""

    def __init__(
        self, series: Sequence[SeriesKey], resolution: str, quantile_texts: Sequence[str], fmt: str
    ) -> None:
        self.series = tuple(series)
        self.resolution, self.quantile_texts, self.fmt = resolution, tuple(quantile_texts), fmt
        n, q = len(self.series), len(quantile_texts)
        self.quantiles = np.full((n, q), None, dtype=object)
        self.quantile_peaks = np.full((n, q), None, dtype=object)
        self.max = np.full(n, None, dtype=object)
        self.peak = np.full(n, None, dtype=object)
        self.samples = np.full(n, None, dtype=object)
        self.lost = np.full(n, None, dtype=object)
        #: rows of e2e series (the only ones with a ``lost`` gauge)
        self.e2e = np.array([s.kind == "e2e" for s in self.series], dtype=bool)
        #: which prefixes are encoded: a row's single-sample families, its quantiles, its peak's
        self._rows = np.zeros(n, dtype=bool)
        self._quantiles = np.zeros((n, q), dtype=bool)
        self._quantile_peaks = np.zeros((n, q), dtype=bool)

    def carry(self, series: Sequence[SeriesKey]) -> PrefixTable:
        """The table for a new set of series (one came or went): the prefixes of those that
        stay are kept, none is encoded again."""
        new = PrefixTable(series, self.resolution, self.quantile_texts, self.fmt)
        old_row = {s: i for i, s in enumerate(self.series)}
        pairs = [(i, old_row[s]) for i, s in enumerate(new.series) if s in old_row]
        if pairs:
            to, src = (np.array(x, dtype=np.int64) for x in zip(*pairs, strict=True))
            for name in ("quantiles", "quantile_peaks", "max", "peak", "samples", "lost"):
                getattr(new, name)[to] = getattr(self, name)[src]
            for name in ("_rows", "_quantiles", "_quantile_peaks"):
                getattr(new, name)[to] = getattr(self, name)[src]
        return new

    def ensure(self, has_q: npt.NDArray[np.bool_], has_pq: npt.NDArray[np.bool_]) -> None:
        """Encode the prefixes the present samples need and have not got yet."""
        need_q = has_q & ~self._quantiles
        need_pq = has_pq & ~self._quantile_peaks
        rows = np.flatnonzero(~self._rows | need_q.any(axis=1) | need_pq.any(axis=1))
        for r in rows.tolist():
            s = self.series[r]
            held = s.partition == ALL_PARTITIONS
            p = series_prefixes(s, self.resolution, self.quantile_texts, self.fmt, held)
            if not self._rows[r]:
                self.max[r], self.peak[r], self.samples[r], self.lost[r] = (
                    p.max,
                    p.peak,
                    p.samples,
                    p.lost,
                )
                self._rows[r] = True
            for j in np.flatnonzero(need_q[r]).tolist():
                self.quantiles[r, j] = p.quantiles[j]
            for j in np.flatnonzero(need_pq[r]).tolist():
                self.quantile_peaks[r, j] = p.quantile_peaks[j]
        self._quantiles |= need_q
        self._quantile_peaks |= need_pq


def _interleave(prefixes: npt.NDArray[np.object_], values: list[bytes]) -> bytes:
    """prefix, value, prefix, value, … joined."""
    if not values:
        return b""
    out: list[bytes] = [b""] * (2 * len(values))
    out[::2] = prefixes.tolist()
    out[1::2] = values
    return b"".join(out)


def value_key(
    value_us: npt.NDArray[np.int64], rank: npt.NDArray[np.int64]
) -> npt.NDArray[np.int64]:
    """A quantile gauge's place in its resolution's protobuf chunk: by value, then quantile."""
    return value_us * 64 + rank


Encoder = Callable[[I64], list[bytes]]


def _text_seconds(values_us: I64) -> list[bytes]:
    return _cached_text(_SECONDS_TEXT, values_us)


def _text_counts(values: I64) -> list[bytes]:
    return _cached_text(_COUNT_TEXT, values)


def _text_exact(values_us: I64) -> list[bytes]:
    return go_texts(values_us / 1e6)


def _pb_seconds(values_us: I64) -> list[bytes]:
    return pb_doubles(values_us / 1e6)


#: Per format, how values are encoded: latencies that repeat (quantiles), exact latencies
#: (maxima), counts.
_TEXT_VALUES: tuple[Encoder, Encoder, Encoder] = (_text_seconds, _text_exact, _text_counts)
_PB_VALUES: tuple[Encoder, Encoder, Encoder] = (_pb_seconds, _pb_seconds, pb_doubles)


def encode_chunk(
    pre: PrefixTable,
    max_us: npt.NDArray[np.int64],
    total: npt.NDArray[np.int64],
    lost: npt.NDArray[np.int64],
    quantiles_us: npt.NDArray[np.int64],
    peak_max_us: npt.NDArray[np.int64],
    peak_quantiles_us: npt.NDArray[np.int64],
    fmt: str,
) -> tuple[bytes, ...]:
    """One group's rows of one resolution encoded per family (``FAMILY_ATTRS`` order): the
    values of the rows joined with their cached prefixes, ``ABSENT`` values left out. Text in
    series order; protobuf too, but for the quantile gauges, joined in order of their value
    (see the module's docstring)."""
    text = fmt == "text"
    seconds, exact, counts = _TEXT_VALUES if text else _PB_VALUES
    has_q = quantiles_us != ABSENT
    held = peak_max_us != ABSENT
    has_pq = peak_quantiles_us != ABSENT
    pre.ensure(has_q, has_pq)
    q_values = quantiles_us[has_q]
    q_prefixes = pre.quantiles[has_q]
    if not text:  # by value, then quantile: equal doubles next to each other (gzip)
        ranks = np.broadcast_to(np.arange(quantiles_us.shape[1]), quantiles_us.shape)[has_q]
        by_value = np.argsort(value_key(q_values, ranks), kind="stable")
        q_values, q_prefixes = q_values[by_value], q_prefixes[by_value]
    return (
        _interleave(q_prefixes, seconds(q_values)),
        _interleave(pre.max, exact(max_us)),
        _interleave(pre.peak[held], exact(peak_max_us[held])),
        _interleave(pre.quantile_peaks[has_pq], seconds(peak_quantiles_us[has_pq])),
        _interleave(pre.samples, counts(total)),
        _interleave(pre.lost[pre.e2e], counts(lost[pre.e2e])),
    )


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


def counter_families(counters: CounterValues) -> Iterable[Any]:
    """One counter family per counter (cumulative since the exporter started)."""
    for attr, (name, doc, labels) in COUNTER_FAMILIES.items():
        fam = CounterMetricFamily(name, doc, labels=labels)
        values = counters[attr]
        for k in sorted(values, key=_counter_order):
            fam.add_metric(list(_label_values(k)), values[k])
        yield fam


@functools.lru_cache(maxsize=1 << 16)  # bounded; 10,000 partitions need 20,000 entries
def _counter_head(attr: str, key: Any) -> bytes:
    """``name_total{labels} `` of one counter sample: its labels do not change between scrapes."""
    name, _, labels = COUNTER_FAMILIES[attr]
    pairs = _labels(dict(zip(labels, _label_values(key), strict=True)))
    return f"{name}_total{{{pairs}}} ".encode()


@functools.lru_cache(maxsize=1 << 16)
def _counter_labels(attr: str, key: Any) -> bytes:
    """A counter sample's Metric up to its double (``_counter_head`` in protobuf)."""
    _, _, labels = COUNTER_FAMILIES[attr]
    return promproto.counter_prefix(
        promproto.labels(dict(zip(labels, _label_values(key), strict=True)))
    )


class CounterOrder:
    """Each counter family's samples in exposition order, with their encoded labels: sorted
    and encoded again only when the family's set of keys changed (20,000 echo and loss
    counters at 10,000 partitions, every one of which changes with each batch)."""

    def __init__(self) -> None:
        #: (family attribute, format) → (its keys, them in order, their label prefixes)
        self._orders: dict[tuple[str, str], tuple[set[Any], list[Any], npt.NDArray[Any]]] = {}

    def __call__(self, attr: str, values: Mapping[Any, int], fmt: str) -> tuple[list[Any], Any]:
        """The keys of ``values`` in order, and their prefixes in ``fmt``."""
        got = self._orders.get((attr, fmt))
        if got is None or got[0] != values.keys():
            order = sorted(values, key=_counter_order)
            head = _counter_head if fmt == "text" else _counter_labels
            heads = np.empty(len(order), dtype=object)
            heads[:] = [head(attr, k) for k in order]
            got = self._orders[(attr, fmt)] = (set(order), order, heads)
        return got[1], got[2]


def counter_text(counters: CounterValues, order: CounterOrder | None = None) -> bytes:
    """``counter_families`` as ``generate_latest`` writes them, by hand: at 10,000 partitions its
    label checks took 0.2 s per scrape for the 20,000 echo and loss counters."""
    order = order or CounterOrder()
    out = []
    for attr, (name, doc, _) in COUNTER_FAMILIES.items():
        out.append(f"# HELP {name}_total {doc}\n# TYPE {name}_total counter\n".encode())
        values = counters[attr]
        keys, heads = order(attr, values, "text")
        counts = np.array([values[k] for k in keys], dtype=np.float64)
        out.append(_interleave(heads, go_texts(counts)))
    return b"".join(out)


def counter_pb(counters: CounterValues, order: CounterOrder | None = None) -> list[bytes]:
    """``counter_text`` as delimited MetricFamily messages."""
    order = order or CounterOrder()
    out: list[bytes] = []
    for attr, (name, doc, _) in COUNTER_FAMILIES.items():
        values = counters[attr]
        keys, heads = order(attr, values, "protobuf")
        counts = np.array([values[k] for k in keys], dtype=np.float64)
        metrics = [_interleave(heads, pb_doubles(counts))]
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
    windows: Sequence[bytes], window_end: Any, histogram: str, counters: bytes, rest: Sequence[Any]
) -> list[bytes]:
    """The whole body, in parts: window gauges, window ends, the histograms, counters, then the
    rest (unjoined: a resolution's chunk that did not change is the same part as before, and
    the server keeps its compression; ``core.gzip_parts``)."""
    head = generate_latest(_Families([window_end]))
    tail = generate_latest(_Families(list(rest)))
    return [*windows, head, histogram.encode(), counters, tail]


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
