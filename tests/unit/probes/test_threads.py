"""Probe threads carry their names into the OS, where the probe bench reads CPU per thread."""

from __future__ import annotations

import os
import threading
import time

from bench.procstat import cpu_s_by_thread
from probes.threads import named


def test_named_thread_shows_its_cpu_under_its_name() -> None:
    def burn() -> None:
        end = time.thread_time() + 0.3
        while time.thread_time() < end:
            pass

    before = cpu_s_by_thread(os.getpid())
    t = threading.Thread(target=named("nines-test-burn", burn))
    t.start()
    # read while it still runs: /proc forgets a thread once it has ended
    while t.is_alive() and "nines-test-burn" not in cpu_s_by_thread(os.getpid()):
        time.sleep(0.01)
    seen = 0.0
    while t.is_alive():
        seen = cpu_s_by_thread(os.getpid()).get("nines-test-burn", seen)
        time.sleep(0.02)
    t.join()
    assert "nines-test-burn" not in before
    assert 0.15 <= seen <= 0.4  # its CPU, at clock-tick resolution, read up to 20 ms early
    # names are cut to the kernel's 15 bytes, not refused
    long = threading.Thread(target=named("nines-a-very-long-thread-name", lambda: time.sleep(0.2)))
    long.start()
    time.sleep(0.05)
    assert "nines-a-very-lo" in cpu_s_by_thread(os.getpid())
    long.join()
