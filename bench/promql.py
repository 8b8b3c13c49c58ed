"""Prometheus's ``histogram_quantile`` over a classic histogram, reimplemented exactly.

This is ``BucketQuantile`` from Prometheus's ``promql/quantile.go``: buckets sorted by upper bound,
the last must be ``+Inf``; rank = q * count; the first finite bucket whose cumulative count reaches
the rank is interpolated linearly (the lowest bucket starts at 0); a rank that only the ``+Inf``
bucket reaches returns the upper bound of the highest finite bucket.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Final

import numpy as np
import numpy.typing as npt

#: ``prometheus_client``'s (and the Go client's) default buckets, in seconds.
DEFAULT_BUCKETS_S: Final = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

#: Prometheus ignores cumulative-count decreases smaller than this relative tolerance.
_SMALL_DELTA_TOLERANCE: Final = 1e-12


def cumulative_buckets(
    values_s: npt.ArrayLike, bounds_s: Sequence[float] = DEFAULT_BUCKETS_S
) -> list[tuple[float, float]]:
    """The ``le`` series a client library would expose for these observations (``+Inf`` last)."""
    v = np.sort(np.asarray(values_s, dtype=np.float64))
    out = [(float(b), float(np.searchsorted(v, b, side="right"))) for b in bounds_s]
    out.append((math.inf, float(v.size)))
    return out


def _coalesce(buckets: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """Merge buckets with equal upper bounds by summing counts, as Prometheus does."""
    out: list[tuple[float, float]] = []
    for le, count in buckets:
        if out and out[-1][0] == le:
            out[-1] = (le, out[-1][1] + count)
        else:
            out.append((le, count))
    return out


def _ensure_monotonic(buckets: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """Force cumulative counts to be non-decreasing (scrape races make them dip)."""
    out: list[tuple[float, float]] = []
    prev: float | None = None
    for le, count in buckets:
        if prev is not None and (
            count < prev or abs(count - prev) <= _SMALL_DELTA_TOLERANCE * abs(prev)
        ):
            count = prev
        prev = count
        out.append((le, count))
    return out


def histogram_quantile(q: float, buckets: Sequence[tuple[float, float]]) -> float:
    """What PromQL's ``histogram_quantile(q, ...)`` returns for one series of ``(le, count)``."""
    if math.isnan(q):
        return math.nan
    if q < 0:
        return -math.inf
    if q > 1:
        return math.inf
    ordered = sorted(buckets, key=lambda b: b[0])
    if not ordered or not math.isinf(ordered[-1][0]):
        return math.nan
    ordered = _ensure_monotonic(_coalesce(ordered))
    if len(ordered) < 2:
        return math.nan
    observations = ordered[-1][1]
    if observations == 0:
        return math.nan
    rank = q * observations
    b = next((i for i in range(len(ordered) - 1) if ordered[i][1] >= rank), len(ordered) - 1)
    if b == len(ordered) - 1:
        return ordered[-2][0]
    if b == 0 and ordered[0][0] <= 0:
        return ordered[0][0]
    bucket_start = 0.0
    bucket_end = ordered[b][0]
    count = ordered[b][1]
    if b > 0:
        bucket_start = ordered[b - 1][0]
        count -= ordered[b - 1][1]
        rank -= ordered[b - 1][1]
    return bucket_start + (bucket_end - bucket_start) * (rank / count)
