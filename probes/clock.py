"""One clock per probe: monotonic, anchored to wall time once, in integer microseconds.

Every timestamp of a probe comes from here, so round-trip latencies carry no clock skew between
hosts and never jump when NTP steps the wall clock.
"""

from __future__ import annotations

import time


class ProbeClock:
    """Microseconds since the epoch, advancing monotonically from the anchor."""

    def __init__(self) -> None:
        self._anchor_wall_us = time.time_ns() // 1000
        self._anchor_mono_ns = time.monotonic_ns()

    def now_us(self) -> int:
        """Now, in microseconds since the epoch (monotonic)."""
        return self._anchor_wall_us + (time.monotonic_ns() - self._anchor_mono_ns) // 1000

    def sleep_until(self, t_us: int) -> None:
        """Sleep until the clock reads ``t_us`` (returns at once if that has passed)."""
        delay_s = (t_us - self.now_us()) / 1e6
        if delay_s > 0:
            time.sleep(delay_s)
