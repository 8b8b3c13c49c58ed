"""The machine's own wake-up jitter: an idle process that sleeps 1 ms at a time (jHiccup's control).

A probe cannot send more punctually than the operating system wakes it. Run beside the probe
bench, this process does nothing but sleep for a millisecond and note how late it woke; its
oversleep quantiles are the floor under the probe's send lag on that machine at that moment
(CPU contention from the broker, the reader of the echoes, the hypervisor). Prints one JSON
object: samples and oversleep p50/p99/p99.9/max in microseconds.

``python -m bench.control_hiccup SECONDS``
"""

from __future__ import annotations

import json
import sys
import time

TICK_NS = 1_000_000


def oversleeps_us(seconds: float) -> list[int]:
    """How late each 1 ms sleep woke, in microseconds, for ``seconds``."""
    out: list[int] = []
    end = time.monotonic_ns() + int(seconds * 1e9)
    expected = time.monotonic_ns() + TICK_NS
    while expected < end:
        delay = expected - time.monotonic_ns()
        if delay > 0:
            time.sleep(delay / 1e9)
        now = time.monotonic_ns()
        out.append(max(0, now - expected) // 1000)
        expected = now + TICK_NS
    return out


def summary(values_us: list[int]) -> dict[str, int]:
    """Samples and nearest-rank quantiles of the oversleeps."""
    from bench.samples import quantiles

    out = {"samples": len(values_us)}
    q = quantiles(values_us)
    if q is not None:
        out.update(q)
        out["over_1ms"] = sum(x > 1000 for x in values_us)
    return out


if __name__ == "__main__":
    print(json.dumps(summary(oversleeps_us(float(sys.argv[1])))), flush=True)
