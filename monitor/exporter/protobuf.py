"""The delimited protobuf format (``core.promproto``) of the contract's families.

For a scraper that asks for it (native histograms are only in this format). Built as the text
format is (``samples``): a sample's Metric up to its double is encoded once per series, doubles
are packed by numpy, and a family's length prefix is the sum of its parts.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from core import promproto
from core.windows import SeriesKey
from monitor.exporter.contract import (
    COUNTER_FAMILIES,
    HISTOGRAM,
    HISTOGRAM_HELP,
    WINDOW_FAMILIES,
    label_values,
    series_labels,
)
from monitor.exporter.native import ZERO_THRESHOLD_S, NativeBuckets


def pb_doubles(values: npt.NDArray[Any]) -> list[bytes]:
    """Each value as a protobuf double (8 bytes, little-endian), in one numpy pass."""
    return values.astype("<f8").view("V8").tolist()  # type: ignore[no-any-return]


def pb_seconds(values_us: npt.NDArray[np.int64]) -> list[bytes]:
    """Latencies in µs as doubles in seconds."""
    return pb_doubles(values_us / 1e6)


@functools.lru_cache(maxsize=64)
def q_label(q_text: str) -> bytes:
    """The ``q`` label of a quantile sample."""
    return promproto.label("q", q_text)


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


def histogram_pb(
    s: SeriesKey, le_seconds: Sequence[float], buckets: Sequence[int], total: int, sum_s: float
) -> bytes:
    """``text.histogram_lines`` as one classic histogram message."""
    return promproto.classic_histogram(
        promproto.labels(series_labels(s)), total, sum_s, le_seconds, buckets
    )


def native_pb(s: SeriesKey, buckets: NativeBuckets, total: int, sum_s: float) -> bytes:
    """One native histogram message of the series' re-binned buckets."""
    spans, deltas = buckets.spans_and_deltas()
    return promproto.native_histogram(
        promproto.labels(series_labels(s)),
        total,
        sum_s,
        buckets.schema,
        ZERO_THRESHOLD_S,
        buckets.zero_count,
        spans,
        deltas,
    )


def histogram_family_pb(
    messages: Sequence[bytes], name: str = HISTOGRAM, doc: str = HISTOGRAM_HELP
) -> list[bytes]:
    """A histogram family from its series' pre-encoded messages."""
    return promproto.family(promproto.family_head(name, doc, promproto.HISTOGRAM), messages)


@functools.lru_cache(maxsize=1 << 16)
def counter_labels(attr: str, key: Any) -> bytes:
    """A counter sample's Metric up to its double (``text.counter_head`` in protobuf)."""
    _, _, names = COUNTER_FAMILIES[attr]
    return promproto.counter_prefix(
        promproto.labels(dict(zip(names, label_values(key), strict=True)))
    )


def counter_family_pb(name: str, doc: str, metrics: Sequence[bytes]) -> list[bytes]:
    """A counter family's delimited message from its samples."""
    return promproto.family(promproto.family_head(f"{name}_total", doc, promproto.COUNTER), metrics)


def body_pb(
    windows: Sequence[bytes],
    window_end: Any,
    histograms: Sequence[bytes],
    counters: Sequence[bytes],
    rest: Sequence[Any],
) -> list[bytes]:
    """``text.body`` in the delimited protobuf format, families in the same order."""
    head = promproto.encode_families([window_end])
    tail = promproto.encode_families(rest)
    return [*windows, head, b"".join((*histograms, *counters)), tail]
