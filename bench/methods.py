"""Four ways to get a high quantile out of windowed latency samples: nines' and three naive ones.

Each method sees the same samples cut into windows (integer microseconds) and returns its reading
of every studied quantile and of the max, in seconds. Only ``nines_merged`` is allowed to be right.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Final

import numpy as np
import numpy.typing as npt

from bench.promql import DEFAULT_BUCKETS_S, cumulative_buckets, histogram_quantile
from core.hdr import HdrLayout, SparseHistogram, rank_for_quantile

#: Quantiles the accuracy study scores; ``1.0`` stands for the max.
STUDY_QUANTILES: Final = (0.99, 0.999, 0.9999, 0.99999, 0.999999, 1.0)

Windows = Sequence[npt.NDArray[np.int64]]
Readings = dict[float, float]

#: Xinfra Monitor's defaults: ``latency.percentile.max.ms`` 5000, granularity 1 ms.
XINFRA_MAX_MS: Final = 5000
XINFRA_GRANULARITY_MS: Final = 1


def exact_quantiles(values_us: npt.NDArray[np.int64]) -> Readings:
    """The truth: nearest-rank quantiles of all samples, and their max."""
    v = np.sort(values_us)
    out = {q: float(v[rank_for_quantile(q, v.size) - 1]) / 1e6 for q in STUDY_QUANTILES if q < 1}
    out[1.0] = float(v[-1]) / 1e6
    return out


def nines_merged(windows: Windows, layout: HdrLayout | None = None) -> Readings:
    """nines: one HDR histogram per window, merged (counts added), quantiles read from the merge."""
    layout = layout or HdrLayout()
    merged = SparseHistogram.empty(layout)
    for w in windows:
        merged = merged.merge(SparseHistogram.from_values(layout, w))
    return {q: merged.value_at_quantile(q) / 1e6 for q in STUDY_QUANTILES}


def averaged_percentiles(windows: Windows) -> Readings:
    """The dashboard way: exact per-window percentiles (and maxes), then averaged over windows."""
    per_window = [exact_quantiles(w) for w in windows if w.size]
    return {q: float(np.mean([r[q] for r in per_window])) for q in STUDY_QUANTILES}


def prometheus_classic(windows: Windows, bounds_s: Sequence[float] = DEFAULT_BUCKETS_S) -> Readings:
    """A classic Prometheus histogram (default buckets) read with ``histogram_quantile``.

    Window boundaries do not matter here: ``sum(increase(..._bucket[1h])) by (le)`` adds the same
    cumulative counts, which is the best a classic histogram can do.
    """
    all_s = np.concatenate(list(windows)).astype(np.float64) / 1e6
    buckets = cumulative_buckets(all_s, bounds_s)
    return {q: histogram_quantile(q, buckets) for q in STUDY_QUANTILES}


def xinfra_percentile(
    values_us: npt.NDArray[np.int64],
    q: float,
    max_ms: int = XINFRA_MAX_MS,
    granularity_ms: int = XINFRA_GRANULARITY_MS,
) -> float:
    """Kafka metrics' ``Percentiles`` with ``ConstantBinScheme`` as Xinfra Monitor configures it.

    Bins are ``granularity_ms`` wide from 0 to ``max_ms``; a value above ``max_ms`` lands in the
    last bin. The readout walks bins accumulating float32 counts and returns the lower edge of the
    first bin where ``sum / count > q`` (strictly), or ``+inf`` if none does.
    """
    bins = max_ms // granularity_ms
    ms = values_us.astype(np.float64) / 1000.0
    index = np.clip((ms / granularity_ms).astype(np.int64), 0, bins - 1)
    counts = np.bincount(index, minlength=bins).astype(np.float32)
    total = np.float32(counts.sum(dtype=np.float32))
    if total == 0:
        return math.nan
    cum = np.cumsum(counts, dtype=np.float32)
    hit = np.nonzero(cum / total > np.float32(q))[0]
    if hit.size == 0:
        return math.inf
    return float(hit[0] * granularity_ms) / 1000.0


def xinfra(windows: Windows) -> Readings:
    """Xinfra Monitor style: 1 ms linear bins clamped at 5 s; max read as the top occupied bin."""
    all_us = np.concatenate(list(windows))
    out = {q: xinfra_percentile(all_us, q) for q in STUDY_QUANTILES if q < 1}
    top_ms = min(int(all_us.max() // 1000), XINFRA_MAX_MS - XINFRA_GRANULARITY_MS)
    out[1.0] = top_ms / 1000.0
    return out


#: Method key → (label for tables, function).
METHODS: Final[dict[str, tuple[str, Callable[[Windows], Readings]]]] = {
    "nines": ("nines: per-window HDR merged", nines_merged),
    "avg_pct": ("average of per-window percentiles", averaged_percentiles),
    "prom_classic": ("Prometheus classic histogram, default buckets", prometheus_classic),
    "xinfra": ("Xinfra Monitor: 1 ms bins clamped at 5 s", xinfra),
}
