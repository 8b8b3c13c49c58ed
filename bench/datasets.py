"""Synthetic latency traces for the accuracy study: each a list of per-window sample arrays (µs)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt

I64 = npt.NDArray[np.int64]


@dataclass(frozen=True)
class Dataset:
    """A named trace cut into equal event-time windows."""

    name: str
    description: str
    windows: list[I64]

    @property
    def samples(self) -> int:
        """Total sample count."""
        return sum(int(w.size) for w in self.windows)

    def all_us(self) -> I64:
        """Every sample in one array."""
        return np.concatenate(self.windows)


def _cut(
    times_s: npt.NDArray[np.float64], values_us: I64, windows: int, window_s: float
) -> list[I64]:
    """Assign samples to windows by their (intended) event time."""
    idx = np.clip((times_s // window_s).astype(np.int64), 0, windows - 1)
    order = np.argsort(idx, kind="stable")
    bounds = np.searchsorted(idx[order], np.arange(windows + 1))
    v = values_us[order]
    return [v[bounds[i] : bounds[i + 1]] for i in range(windows)]


def _lognormal_us(rng: np.random.Generator, n: int, median_ms: float, sigma: float) -> I64:
    """Lognormal latencies in whole microseconds, at least 1 µs."""
    x = rng.lognormal(np.log(median_ms * 1000.0), sigma, n)
    return np.maximum(np.rint(x), 1).astype(np.int64)


def lognormal(n: int, windows: int, window_s: float, seed: int) -> Dataset:
    """A healthy broker: median 2 ms, heavy lognormal tail (sigma 1.2)."""
    rng = np.random.default_rng(seed)
    t = np.sort(rng.uniform(0, windows * window_s, n))
    return Dataset(
        "lognormal",
        "lognormal, median 2 ms, sigma 1.2",
        _cut(t, _lognormal_us(rng, n, 2.0, 1.2), windows, window_s),
    )


HICCUP_FRACTION: Final = 0.00015


def hiccups(n: int, windows: int, window_s: float, seed: int) -> Dataset:
    """The lognormal broker plus rare multi-second hiccups (0.015 % of samples at 2–8 s)."""
    rng = np.random.default_rng(seed)
    t = np.sort(rng.uniform(0, windows * window_s, n))
    v = _lognormal_us(rng, n, 2.0, 1.2)
    k = max(1, round(n * HICCUP_FRACTION))
    hit = rng.choice(n, size=k, replace=False)
    v[hit] = rng.integers(2_000_000, 8_000_000, size=k)
    return Dataset(
        "hiccups",
        f"lognormal + {HICCUP_FRACTION:.3%} of samples at 2–8 s",
        _cut(t, v, windows, window_s),
    )


STALL_S: Final = 5.0


def ctrl_z(n: int, windows: int, window_s: float, seed: int) -> Dataset:
    """CTRL+Z: steady ~1 ms at a fixed rate, one 5 s stall seen by an open-loop probe.

    A message intended at time t inside the stall [s, s + S) is answered at s + S, so it waits
    S − (t − s) plus the floor: 5 s, 4.99 s, … down to the floor.
    """
    rng = np.random.default_rng(seed)
    span = windows * window_s
    t = np.arange(n) * (span / n)
    v = 1000 + rng.integers(0, 100, n)
    start = span / 2 + 3.0
    stalled = (t >= start) & (t < start + STALL_S)
    v[stalled] += np.rint((start + STALL_S - t[stalled]) * 1e6).astype(np.int64)
    return Dataset(
        "ctrl_z",
        f"steady 1 ms at a fixed rate, one {STALL_S:g} s stall (open-loop view)",
        _cut(t, v.astype(np.int64), windows, window_s),
    )


def bimodal(n: int, windows: int, window_s: float, seed: int) -> Dataset:
    """Two modes: 2 ms, and 80 ms for 10 % of traffic in every third window (rebalances)."""
    rng = np.random.default_rng(seed)
    t = np.sort(rng.uniform(0, windows * window_s, n))
    v = _lognormal_us(rng, n, 2.0, 0.4)
    slow_window = (np.arange(windows) % 3) == 0
    in_slow = slow_window[np.clip((t // window_s).astype(np.int64), 0, windows - 1)]
    slow = in_slow & (rng.random(n) < 0.10)
    v[slow] = _lognormal_us(rng, int(slow.sum()), 80.0, 0.5)
    return Dataset(
        "bimodal",
        "2 ms mode + 80 ms mode (10 % of traffic in every third window)",
        _cut(t, v, windows, window_s),
    )


GENERATORS: Final[dict[str, Callable[[int, int, float, int], Dataset]]] = {
    "lognormal": lognormal,
    "hiccups": hiccups,
    "ctrl_z": ctrl_z,
    "bimodal": bimodal,
}
