"""One background worker that runs a job after each kick: the exporter's pre-render.

A coarse resolution's windows (1 m, 1 h) close rarely; encoding and deflating its chunk when they
close, rather than in the next scrape, keeps the hourly scrape as cheap as the others. The worker
is bounded: one daemon thread, started at the first kick, never two runs at once, and kicks that
come while a run is under way make one more run, not a queue.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

log = logging.getLogger("nines.exporter")


class Prerenderer:
    """Runs ``job`` in a daemon thread after ``kick``; kicks during a run coalesce into one."""

    def __init__(self, job: Callable[[], None], name: str = "nines-prerender") -> None:
        self._job = job
        self._name = name
        self._cond = threading.Condition()
        self._pending = False
        self._running = False
        self._thread: threading.Thread | None = None
        #: runs finished, and the CPU seconds they took in the worker's thread (reported, so
        #: the work moved off the scrape is not hidden)
        self.runs = 0
        self.cpu_s = 0.0

    def kick(self) -> None:
        """Ask for one run (after the current one, if a run is under way)."""
        with self._cond:
            self._pending = True
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name=self._name, daemon=True)
                self._thread.start()
            self._cond.notify_all()

    def wait(self, timeout_s: float) -> bool:
        """Whether the worker is idle (nothing asked for, nothing running) within ``timeout_s``."""
        with self._cond:
            return self._cond.wait_for(lambda: not self._pending and not self._running, timeout_s)

    def _loop(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._pending)
                self._pending, self._running = False, True
            started = time.thread_time()
            try:
                self._job()
            except Exception:  # a scrape renders what the worker did not: log, never die
                log.exception("pre-rendering the coarse resolutions failed")
            finally:
                with self._cond:
                    self.cpu_s += time.thread_time() - started
                    self.runs += 1
                    self._running = False
                    self._cond.notify_all()
