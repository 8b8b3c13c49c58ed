"""The probe's own pauses, jHiccup-style: a 1 ms timer that notices when it oversleeps.

GC, CPU throttling or a SIGSTOP of the probe all show up as a long oversleep, so a window in which
the measuring side stalled can be told apart from a broker stall.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from core.echo import Hiccup
from probes.clock import ProbeClock
from probes.threads import Deaths, named

TICK_US = 1000


class HiccupMeter(threading.Thread):
    """Publishes one ``Hiccup`` record per interval through ``emit``."""

    def __init__(
        self,
        clock: ProbeClock,
        probe: str,
        cluster: str,
        interval_s: float,
        emit: Callable[[Hiccup], None],
        deaths: Deaths | None = None,
    ) -> None:
        super().__init__(name="nines-hiccup", daemon=True)
        self.clock, self.probe, self.cluster = clock, probe, cluster
        self.interval_us = int(interval_s * 1e6)
        self.emit = emit
        self.stopping = threading.Event()
        self.last_max_us = 0
        self.deaths = deaths

    def run(self) -> None:
        """The meter's loop, its death recorded in ``deaths`` (when given)."""
        named(self.name, self._measure, self.deaths)()

    def _measure(self) -> None:
        """Tick every millisecond; report the longest and total oversleep per interval."""
        start = self.clock.now_us()
        worst = total = count = 0
        expected = start + TICK_US
        while not self.stopping.is_set():
            self.clock.sleep_until(expected)
            now = self.clock.now_us()
            pause = max(0, now - expected)
            worst, total, count = max(worst, pause), total + pause, count + 1
            expected = now + TICK_US
            if now - start >= self.interval_us:
                self.last_max_us = worst
                self.emit(Hiccup(self.probe, self.cluster, start, now, worst, total, count))
                start, worst, total, count = now, 0, 0, 0

    def stop(self) -> None:
        """Stop after the current tick."""
        self.stopping.set()
