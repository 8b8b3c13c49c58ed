"""Probe threads carry their names into the OS, where the probe bench reads CPU per thread."""

from __future__ import annotations

import hashlib
import os
import threading
import time

from bench.procstat import cpu_s_by_thread
from probes.threads import named

BLOCK = bytes(1 << 16)  # hashing this releases the GIL, so the burner never starves the reader


def test_named_thread_shows_its_cpu_under_its_name() -> None:
    own_cpu = [0.0]  # the burner's own thread_time(), updated as it goes
    stop = threading.Event()

    def burn() -> None:
        while not stop.is_set():
            hashlib.sha256(BLOCK).digest()
            own_cpu[0] = time.thread_time()

    assert "nines-test-burn" not in cpu_s_by_thread(os.getpid())
    t = threading.Thread(target=named("nines-test-burn", burn), daemon=True)
    t.start()
    try:
        deadline = time.monotonic() + 20
        while own_cpu[0] < 0.2 and time.monotonic() < deadline:
            time.sleep(0.02)
        before = own_cpu[0]
        seen = cpu_s_by_thread(os.getpid()).get("nines-test-burn")
        after = own_cpu[0]
    finally:
        stop.set()
        t.join(5)
    assert before >= 0.2, "the burner got no CPU in 20 s"
    # /proc counts in clock ticks (10 ms): what it shows lies between the thread's own readings
    assert seen is not None and before - 0.03 <= seen <= after + 0.03, (before, seen, after)
    # names are cut to the kernel's 15 bytes, not refused
    release = threading.Event()
    long = threading.Thread(target=named("nines-a-very-long-thread-name", release.wait))
    long.start()
    try:
        deadline = time.monotonic() + 5
        names = cpu_s_by_thread(os.getpid())
        while "nines-a-very-lo" not in names and time.monotonic() < deadline:
            time.sleep(0.01)
            names = cpu_s_by_thread(os.getpid())
    finally:
        release.set()
        long.join(5)
    assert "nines-a-very-lo" in names
