"""Exactly once across a crash: SIGKILL `nines stream` (its process group: the Python driver and
Spark's JVM at once, as the OOM killer or a lost node ends them), restart it, and count every
echo once."""

from __future__ import annotations

import os
import signal
import time
from collections import Counter
from pathlib import Path
from typing import Any

from kafka_cluster import unique_topic
from stream_jobs import (
    archived,
    assert_exactly_once,
    push,
    send,
    stream_cli,
    wait_group_gone,
    wait_running,
)


def test_sigkill_and_restart_counts_every_echo_once(any_broker: Any, tmp_path: Path) -> None:
    broker = any_broker  # the mock, Tansu, then Apache Kafka
    topic = unique_topic(broker, 2)
    log = tmp_path / "stream.log"
    t0 = (int(time.time()) // 60 * 60 - 3600) * 1_000_000
    expected: Counter[int] = Counter()
    send(broker.bootstrap, topic, range(0, 1500), t0, expected)  # 30 s of echoes
    proc = stream_cli(broker.bootstrap, topic, tmp_path, log)
    try:
        wait_running(lambda: len(archived(tmp_path / "archive")) >= 4, proc, log, 180)
        os.killpg(proc.pid, signal.SIGKILL)
        wait_group_gone(proc)
        send(broker.bootstrap, topic, range(1500, 3000), t0, expected)  # 30 s more while dead
        push(broker.bootstrap, topic, t0 + 600_000_000)
        proc = stream_cli(broker.bootstrap, topic, tmp_path, log)
        windows = set(expected)
        closed = lambda: windows <= {w.window_start_us for w in archived(tmp_path / "archive")}  # noqa: E731
        wait_running(closed, proc, log, 180)
        os.killpg(proc.pid, signal.SIGTERM)
        assert proc.wait(60) == 0, log.read_text(errors="replace")[-3000:]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert_exactly_once(archived(tmp_path / "archive"), expected)
