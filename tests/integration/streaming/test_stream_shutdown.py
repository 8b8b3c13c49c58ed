"""SIGTERM and SIGINT end `nines stream` with exit 0 and no stack trace, and the batch a stop
abandons is replayed exactly once by the next start.

The signals go to the whole process group, as a terminal (Ctrl+C), `timeout` or an init that
signals the group sends them: the Spark JVM gets them too, and its shutdown hook used to stop
the SparkContext under the running query ("Cannot call methods on a stopped SparkContext").
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from kafka_cluster import unique_topic
from stream_jobs import (
    Collector,
    archived,
    assert_exactly_once,
    job_config,
    push,
    send,
    stream_cli,
    wait_group_gone,
    wait_running,
)

from streaming.job import StreamJob

#: What must never follow a signal in the job's log.
TRACES = ("Traceback", "Exception", "ERROR", "\tat org.apache")


def stop_group(proc: subprocess.Popen[bytes], sig: signal.Signals, log: Path) -> float:
    """Signal the process group; assert exit 0 and a log free of traces after the signal."""
    before = log.stat().st_size
    t = time.monotonic()
    os.killpg(proc.pid, sig)
    assert proc.wait(60) == 0, log.read_text(errors="replace")[-3000:]
    took = time.monotonic() - t
    with open(log, "rb") as f:
        f.seek(before)
        after = f.read().decode(errors="replace")
    assert not [t for t in TRACES if t in after], after[-3000:]
    return took


def test_sigterm_and_sigint_to_the_group_exit_0_and_restart_exactly_once(
    broker: Any, tmp_path: Path
) -> None:
    topic = unique_topic(broker, 2)
    log = tmp_path / "stream.log"
    t0 = (int(time.time()) // 60 * 60 - 3600) * 1_000_000
    expected: Counter[int] = Counter()
    send(broker.bootstrap, topic, range(0, 1500), t0, expected)  # 30 s of echoes
    proc = stream_cli(broker.bootstrap, topic, tmp_path, log)
    try:
        wait_running(lambda: len(archived(tmp_path / "archive")) >= 4, proc, log, 180)
        sigterm_s = stop_group(proc, signal.SIGTERM, log)
        wait_group_gone(proc)
        send(broker.bootstrap, topic, range(1500, 3000), t0, expected)  # while it is down
        push(broker.bootstrap, topic, t0 + 600_000_000)
        proc = stream_cli(broker.bootstrap, topic, tmp_path, log)
        windows = set(expected)
        closed = lambda: windows <= {w.window_start_us for w in archived(tmp_path / "archive")}  # noqa: E731
        wait_running(closed, proc, log, 180)
        sigint_s = stop_group(proc, signal.SIGINT, log)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert_exactly_once(archived(tmp_path / "archive"), expected)
    print(f"stop after SIGTERM {sigterm_s:.1f} s, after SIGINT {sigint_s:.1f} s")


def test_an_abandoned_batch_is_replayed_exactly_once(
    spark: Any, broker: Any, tmp_path: Path
) -> None:
    """A stop that cannot wait for the batch in flight abandons it (archived, not committed);
    the next start replays it, rewriting its archive file instead of adding one."""
    topic = unique_topic(broker, 2)
    t0 = (int(time.time()) // 60 * 60 - 3600) * 1_000_000
    expected: Counter[int] = Counter()
    send(broker.bootstrap, topic, range(0, 3000), t0, expected)
    push(broker.bootstrap, topic, t0 + 600_000_000)
    config = job_config(
        broker.bootstrap,
        topic,
        checkpoint=str(tmp_path / "ckpt"),
        archive=str(tmp_path / "archive"),
        max_records_per_batch=500,
    )
    in_flight = threading.Event()
    release = threading.Event()
    abandoned: list[int] = []

    def slow(batch_id: int, windows: list[Any], counters: Any) -> None:
        if windows and not in_flight.is_set():  # the first batch that closed windows
            abandoned.append(batch_id)
            in_flight.set()
            release.wait(30)

    first = StreamJob(config, spark, on_batch=slow).start()
    try:
        assert in_flight.wait(180), first.query.exception()
        # the batch in flight wrote its archive before its commit
        assert archived(tmp_path / "archive")
        stopper = threading.Thread(target=first.stop, kwargs={"grace_s": 0.5})
        stopper.start()
        time.sleep(2)  # the stop gave up waiting and stops the query under the batch
        release.set()
        stopper.join(60)
        assert not stopper.is_alive() and not first.query.isActive
    finally:
        release.set()
        first.stop(grace_s=0)
    # Spark interrupts the batch's thread, which is inside our Python callback then: whether
    # its commit still lands depends on whether the thread meets an interruptible call before
    # the commit file is written (it did in 2 of 2 CI-like runs with the C1-only JVM of issue
    # 24). The checkpoint's commit log says which happened; the restart must follow it.
    committed = (tmp_path / "ckpt" / "commits" / str(abandoned[0])).exists()
    collected = Collector()
    second = StreamJob(config, spark, on_batch=collected).start()
    try:
        collected.wait(
            lambda c: set(expected) <= {w.window_start_us for w in archived(tmp_path / "archive")},
            180,
            job=second,
        )
    finally:
        second.stop()
    if committed:  # the restart starts after it
        assert min(collected.ids) == abandoned[0] + 1, (abandoned, collected.ids)
    else:  # abandoned: the restart runs it again, rewriting its archive file
        assert min(collected.ids) == abandoned[0], (abandoned, collected.ids)
    print(f"batch {abandoned[0]} at the stop: {'committed' if committed else 'abandoned'}")
    assert_exactly_once(archived(tmp_path / "archive"), expected)
