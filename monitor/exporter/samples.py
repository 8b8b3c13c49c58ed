"""A scrape's samples in either format: each label set's prefix encoded once, joined with values.

A (series, quantile) sample's label set never changes, only its value does, so its prefix (the
text line up to the value, the protobuf Metric up to its double) is encoded once per series
(``series_prefixes``, kept in a ``PrefixTable``) and a scrape joins the prefixes with the values of
the window rows (``window_rows``) in one pass per resolution; counters the same (``CounterOrder``).
Why by hand and not with prometheus_client's metric families: docs/benchmarks.md, scrape cost.

One thing differs between the formats: in protobuf a resolution's quantile gauges are joined in
order of their value, not of their series. A latency is 8 incompressible bytes as a double (a few
digits as text), but HDR reports few distinct values, so in value order equal doubles follow each
other and gzip sends each about once (docs/benchmarks.md, cardinality). The max gauges are exact
(nearly all distinct) and stay in series order, which compresses their labels best. A family's
metrics have no order in the format, and Prometheus keys every series by its labels.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from core import promproto
from core.windows import ALL_PARTITIONS, SeriesKey
from monitor.exporter import protobuf, text
from monitor.exporter.contract import (
    COUNTER_FAMILIES,
    CounterValues,
    counter_order,
    family_names,
    series_labels,
)
from monitor.exporter.window_rows import ABSENT

I64 = npt.NDArray[np.int64]


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
    name = family_names(s)
    pairs = {**series_labels(s), "window": resolution}
    e2e = s.kind == "e2e"
    none = (None,) * len(quantile_texts)
    if fmt == "text":
        lv, lq = text.labels(pairs), text.labels(pairs, extra="q")
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
        promproto.gauge_prefix(before + protobuf.q_label(qt) + after) for qt in quantile_texts
    )
    return Prefixes(
        quantiles,
        plain,
        plain if held else None,
        quantiles if held else none,
        plain,
        plain if e2e else None,
    )


class PrefixTable:
    """One group's ``Prefixes`` in exposition order (a resolution's partition and topic series, or
    its broker rollups), as object arrays (rows × quantiles for the quantile families), so that a
    scrape picks the present samples' prefixes in one step. A prefix is encoded when a sample
    first needs it (``ensure``): a 10 s window rarely has the p99.99 a 1 h window has, and the
    unused ones would take memory for nothing."""

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
#: Per format, how values are encoded: latencies that repeat (quantiles), exact latencies
#: (maxima), counts.
_TEXT_VALUES: tuple[Encoder, Encoder, Encoder] = (
    text.text_seconds,
    text.text_exact,
    text.text_counts,
)
_PB_VALUES: tuple[Encoder, Encoder, Encoder] = (
    protobuf.pb_seconds,
    protobuf.pb_seconds,
    protobuf.pb_doubles,
)


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
    is_text = fmt == "text"
    seconds, exact, counts = _TEXT_VALUES if is_text else _PB_VALUES
    has_q = quantiles_us != ABSENT
    held = peak_max_us != ABSENT
    has_pq = peak_quantiles_us != ABSENT
    pre.ensure(has_q, has_pq)
    q_values = quantiles_us[has_q]
    q_prefixes = pre.quantiles[has_q]
    if not is_text:  # by value, then quantile: equal doubles next to each other (gzip)
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


class CounterOrder:
    """Each counter family's samples in exposition order, with their encoded labels: sorted
    and encoded again only when the family's set of keys changed (the echo and loss counters
    of every partition change with each batch; their keys rarely do)."""

    def __init__(self) -> None:
        #: (family attribute, format) → (its keys, them in order, their label prefixes)
        self._orders: dict[tuple[str, str], tuple[set[Any], list[Any], npt.NDArray[Any]]] = {}

    def __call__(self, attr: str, values: Mapping[Any, int], fmt: str) -> tuple[list[Any], Any]:
        """The keys of ``values`` in order, and their prefixes in ``fmt``."""
        got = self._orders.get((attr, fmt))
        if got is None or got[0] != values.keys():
            order = sorted(values, key=counter_order)
            head = text.counter_head if fmt == "text" else protobuf.counter_labels
            heads = np.empty(len(order), dtype=object)
            heads[:] = [head(attr, k) for k in order]
            got = self._orders[(attr, fmt)] = (set(order), order, heads)
        return got[1], got[2]


def _counter_samples(
    counters: CounterValues, order: CounterOrder, fmt: str
) -> list[tuple[str, str, bytes]]:
    """Each counter family's (name, help, joined samples) in ``fmt``."""
    encode = text.go_texts if fmt == "text" else protobuf.pb_doubles
    out = []
    for attr, (name, doc, _) in COUNTER_FAMILIES.items():
        values = counters[attr]
        keys, heads = order(attr, values, fmt)
        counts = np.array([values[k] for k in keys], dtype=np.float64)
        out.append((name, doc, _interleave(heads, encode(counts))))
    return out


def counter_text(counters: CounterValues, order: CounterOrder | None = None) -> bytes:
    """``contract.counter_families`` as ``generate_latest`` writes them, by hand: without its
    per-sample label checks (docs/benchmarks.md, scrape cost)."""
    samples = _counter_samples(counters, order or CounterOrder(), "text")
    return b"".join(text.counter_family_head(name, doc) + s for name, doc, s in samples)


def counter_pb(counters: CounterValues, order: CounterOrder | None = None) -> list[bytes]:
    """``counter_text`` as delimited MetricFamily messages."""
    out: list[bytes] = []
    for name, doc, s in _counter_samples(counters, order or CounterOrder(), "protobuf"):
        out += protobuf.counter_family_pb(name, doc, [s])
    return out
