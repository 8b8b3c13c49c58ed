"""Exact summaries of raw timing samples (probe bench, soak, control process)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from core.hdr import rank_for_quantile

#: Reported besides the max, by the names the result files use.
QUANTILES = {"p50": 0.5, "p99": 0.99, "p999": 0.999}


def quantiles(values: Sequence[int] | npt.NDArray[np.int64]) -> dict[str, int] | None:
    """Exact nearest-rank p50/p99/p99.9 and the max of integer microseconds; None for none."""
    v = np.sort(np.asarray(values, dtype=np.int64))
    if v.size == 0:
        return None
    out = {k: int(v[rank_for_quantile(q, v.size) - 1]) for k, q in QUANTILES.items()}
    out["max"] = int(v[-1])
    return out
