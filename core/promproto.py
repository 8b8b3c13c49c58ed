"""Prometheus' protobuf exposition (``io.prometheus.client.MetricFamily``, varint-delimited).

Native histograms reach Prometheus only over this format (2.x with
``--enable-feature=native-histograms``, 3.x with ``scrape_native_histograms: true``), and
prometheus_client (0.26) has no protobuf exposition. So this is a small protobuf *wire encoder*
of the messages the scrape needs, written from the public exposition-format definition
(``metrics.proto``; field numbers below), with no dependency: a Metric is a few fields, so
pre-encoded bytes are joined per family the way the text lines are. Pure: it imports nothing
from prometheus_client (``encode_families`` reads its families by duck typing).

The messages (proto3, field numbers as in ``metrics.proto``)::

    MetricFamily { string name = 1; string help = 2; MetricType type = 3;
                   repeated Metric metric = 4; }
    Metric       { repeated LabelPair label = 1; Gauge gauge = 2; Counter counter = 3;
                   Untyped untyped = 5; Histogram histogram = 7; }
    LabelPair    { string name = 1; string value = 2; }
    Gauge, Counter, Untyped { double value = 1; }
    Histogram    { uint64 sample_count = 1; double sample_sum = 2; repeated Bucket bucket = 3;
                   sint32 schema = 5; double zero_threshold = 6; uint64 zero_count = 7;
                   repeated BucketSpan positive_span = 12; repeated sint64 positive_delta = 13; }
    Bucket       { uint64 cumulative_count = 1; double upper_bound = 2; }
    BucketSpan   { sint32 offset = 1; uint32 length = 2; }
    MetricType   { COUNTER = 0; GAUGE = 1; SUMMARY = 2; UNTYPED = 3; HISTOGRAM = 4; }
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

#: The media type a scraper asks for, and what such a body is served as.
CONTENT_TYPE: Final = (
    "application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; encoding=delimited"
)

COUNTER: Final = 0
GAUGE: Final = 1
UNTYPED: Final = 3
HISTOGRAM: Final = 4

_DOUBLE = struct.Struct("<d")
_VARINT_1 = [bytes([i]) for i in range(128)]


def varint(n: int) -> bytes:
    """An unsigned base-128 varint (negative int64s as their two's complement, 10 bytes)."""
    if 0 <= n < 128:
        return _VARINT_1[n]
    n &= (1 << 64) - 1
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def zigzag(n: int) -> int:
    """A signed integer as ``sint32``/``sint64`` carry it."""
    return (n << 1) ^ (n >> 63)


def _len_field(field: int, payload: bytes) -> bytes:
    """A length-delimited field (wire type 2): strings, sub-messages, packed repeats."""
    return varint(field << 3 | 2) + varint(len(payload)) + payload


def _str_field(field: int, text: str) -> bytes:
    return _len_field(field, text.encode())


def _double_field(field: int, value: float) -> bytes:
    return varint(field << 3 | 1) + _DOUBLE.pack(value)


def _uint_field(field: int, value: int) -> bytes:
    return varint(field << 3) + varint(value)


def labels(pairs: Mapping[str, str]) -> bytes:
    """A Metric's ``label`` fields, sorted by name (as the text format writes them)."""
    return b"".join([label(n, pairs[n]) for n in sorted(pairs)])


@functools.lru_cache(maxsize=1 << 16)  # label values repeat across a series' windows
def label(name: str, value: str) -> bytes:
    """One ``label`` field: to add a varying label (``q``) to fixed ones, keep sorted order."""
    return _len_field(1, _str_field(1, name) + _str_field(2, value))


#: Metric's field 2/3/5 (Gauge, Counter, Untyped) holding a 9-byte message: its double, field 1.
_GAUGE = b"\x12\x09\x09"
_COUNTER = b"\x1a\x09\x09"
_UNTYPED = b"\x2a\x09\x09"


def _metric(body: bytes) -> bytes:
    """A Metric as the MetricFamily's repeated field 4 (ready to be joined with others)."""
    return b"\x22" + varint(len(body)) + body


def gauge(label_fields: bytes, value: float) -> bytes:
    """One gauge Metric (field 4 of its family)."""
    return _metric(label_fields + _GAUGE + _DOUBLE.pack(value))


def gauge_prefix(label_fields: bytes) -> bytes:
    """A gauge Metric up to its value: ``gauge(l, v) == gauge_prefix(l) + <v as a double>``
    (a series' labels are encoded once, its values joined on at every change)."""
    return b"\x22" + varint(len(label_fields) + len(_GAUGE) + 8) + label_fields + _GAUGE


def counter_prefix(label_fields: bytes) -> bytes:
    """``gauge_prefix`` of a counter Metric."""
    return b"\x22" + varint(len(label_fields) + len(_COUNTER) + 8) + label_fields + _COUNTER


def counter(label_fields: bytes, value: float) -> bytes:
    """One counter Metric (field 4 of its family)."""
    return _metric(label_fields + _COUNTER + _DOUBLE.pack(value))


def untyped(label_fields: bytes, value: float) -> bytes:
    """One untyped Metric (field 4 of its family)."""
    return _metric(label_fields + _UNTYPED + _DOUBLE.pack(value))


def classic_histogram(
    label_fields: bytes,
    count: int,
    sum_: float,
    upper_bounds: Sequence[float],
    cumulative: Sequence[int],
) -> bytes:
    """One classic histogram Metric: cumulative ``le`` buckets (``+Inf`` is the count)."""
    buckets = b"".join(
        _len_field(3, _uint_field(1, c) + _double_field(2, le))
        for le, c in zip(upper_bounds, cumulative, strict=True)
    )
    hist = _uint_field(1, count) + _double_field(2, sum_) + buckets
    return _metric(label_fields + _len_field(7, hist))


def native_histogram(
    label_fields: bytes,
    count: int,
    sum_: float,
    schema: int,
    zero_threshold: float,
    zero_count: int,
    spans: Sequence[tuple[int, int]],
    deltas: Sequence[int],
) -> bytes:
    """One native (sparse, exponential) histogram Metric with positive buckets only.

    ``spans`` are (offset, length): the first offset is the first bucket's index, each later
    one the gap after the previous span; ``deltas`` the count of each bucket minus the previous
    bucket's (the first: its count). With no bucket at all, one empty span ``(0, 0)`` says the
    histogram is native (the spec's no-op span), never a classic one without buckets.
    """
    if not spans:
        spans = [(0, 0)]
    hist = b"".join(
        (
            _uint_field(1, count),
            _double_field(2, sum_),
            _uint_field(5, zigzag(schema)),
            _double_field(6, zero_threshold),
            _uint_field(7, zero_count),
            *(_len_field(12, _uint_field(1, zigzag(o)) + _uint_field(2, n)) for o, n in spans),
        )
    )
    if deltas:
        hist += _len_field(13, b"".join(varint(zigzag(d)) for d in deltas))
    return _metric(label_fields + _len_field(7, hist))


def family_head(name: str, help_: str, type_: int) -> bytes:
    """A MetricFamily's fields before its metrics."""
    return _str_field(1, name) + _str_field(2, help_) + _uint_field(3, type_)


def family(head: bytes, metrics: Sequence[bytes]) -> list[bytes]:
    """One delimited MetricFamily from its head and its pre-encoded metrics (unjoined, so a
    large body is copied once)."""
    size = len(head) + sum(len(m) for m in metrics)
    return [varint(size), head, *metrics]


def encode_families(families: Iterable[Any]) -> bytes:
    """prometheus_client metric families (counter, gauge, untyped/unknown, classic histogram),
    delimited: what a text scrape of the same families shows."""
    out: list[bytes] = []
    for fam in families:
        kind = fam.type
        if kind == "counter":
            name, type_ = f"{fam.name}_total", COUNTER
            metrics = [counter(labels(s.labels), s.value) for s in fam.samples if s.name == name]
        elif kind == "gauge":
            name, type_ = fam.name, GAUGE
            metrics = [gauge(labels(s.labels), s.value) for s in fam.samples if s.name == name]
        elif kind in ("untyped", "unknown"):
            name, type_ = fam.name, UNTYPED
            metrics = [untyped(labels(s.labels), s.value) for s in fam.samples if s.name == name]
        elif kind == "histogram":
            name, type_ = fam.name, HISTOGRAM
            metrics = _histograms(fam)
        else:
            raise ValueError(f"{fam.name}: no protobuf encoding for a {kind}")
        out += family(family_head(name, fam.documentation, type_), metrics)
    return b"".join(out)


def _histograms(fam: Any) -> list[bytes]:
    """A classic histogram family's metrics, grouped by their labels without ``le``."""
    series: dict[tuple[tuple[str, str], ...], dict[str, Any]] = {}
    for s in fam.samples:
        key = tuple(sorted((k, v) for k, v in s.labels.items() if k != "le"))
        h = series.setdefault(key, {"le": [], "count": 0, "sum": 0.0})
        if s.name == f"{fam.name}_bucket" and s.labels["le"] != "+Inf":
            h["le"].append((float(s.labels["le"]), int(s.value)))
        elif s.name == f"{fam.name}_count":
            h["count"] = int(s.value)
        elif s.name == f"{fam.name}_sum":
            h["sum"] = float(s.value)
    return [
        classic_histogram(
            labels(dict(key)),
            h["count"],
            h["sum"],
            [le for le, _ in sorted(h["le"])],
            [c for _, c in sorted(h["le"])],
        )
        for key, h in series.items()
    ]


def wants_protobuf(accept: str) -> bool:
    """Whether an Accept header asks for delimited MetricFamily protobuf over the text format.

    Prometheus sends e.g. ``application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;
    encoding=delimited;q=0.7,text/plain;version=0.0.4;q=0.3,*/*;q=0.1`` when it wants native
    histograms; anything else (curl, a 3.x without them) gets the text format.
    """
    best_pb, best_other = 0.0, 0.0
    for item in accept.split(","):
        media, *params = (p.strip() for p in item.split(";"))
        values = {}
        for p in params:
            k, _, v = p.partition("=")
            values[k.strip().lower()] = v.strip().strip('"')
        try:
            q = float(values.get("q", "1"))
        except ValueError:
            continue
        if media.lower() == "application/vnd.google.protobuf":
            if (
                values.get("proto") == "io.prometheus.client.MetricFamily"
                and values.get("encoding") == "delimited"
            ):
                best_pb = max(best_pb, q)
        elif media:
            best_other = max(best_other, q)
    return best_pb > 0 and best_pb >= best_other
