"""The pre-render worker is bounded: one thread, one run at a time, kicks coalesce."""

from __future__ import annotations

import threading

import pytest

from monitor.exporter.prerender import Prerenderer


def test_kicks_during_a_run_make_one_more_run_never_two_at_once() -> None:
    started, release = threading.Event(), threading.Event()
    running, most = [0], [0]
    lock = threading.Lock()

    def job() -> None:
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        started.set()
        release.wait(10)
        with lock:
            running[0] -= 1

    worker = Prerenderer(job, name="nines-prerender-bounded")
    assert worker.wait(0.1) and worker.runs == 0  # idle before any kick: no thread
    worker.kick()
    assert started.wait(10)
    for _ in range(5):  # while the first run is under way
        worker.kick()
    assert not worker.wait(0.05)  # busy
    release.set()
    assert worker.wait(10)
    assert worker.runs == 2 and most[0] == 1
    threads = [t for t in threading.enumerate() if t.name == "nines-prerender-bounded"]
    assert len(threads) == 1 and threads[0].daemon


def test_a_failing_run_is_logged_and_the_worker_goes_on(caplog: pytest.LogCaptureFixture) -> None:
    calls = [0]

    def job() -> None:
        calls[0] += 1
        if calls[0] == 1:
            raise RuntimeError("boom")

    worker = Prerenderer(job, name="nines-prerender-test")
    worker.kick()
    assert worker.wait(10)
    worker.kick()
    assert worker.wait(10)
    assert calls[0] == 2 == worker.runs
    assert "pre-rendering the coarse resolutions failed" in caplog.text
