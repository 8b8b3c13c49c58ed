"""Exactly once across a crash: SIGKILL `nines stream`, restart it, and count every echo once."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from kafka_cluster import producer, unique_topic
from stream_jobs import archived, assert_exactly_once

from core.echo import Echo, encode_record
from testkit.archive import read_windows


def stream(bootstrap: str, topic: str, tmp: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "monitor",
            "stream",
            "--bootstrap",
            bootstrap,
            "--echo-topic",
            topic,
            "--windows",
            "10s",
            "--watermark",
            "1s",
            "--trigger",
            "500ms",
            "--starting-offsets",
            "earliest",
            "--checkpoint",
            str(tmp / "ckpt"),
            "--archive",
            str(tmp / "archive"),
            "--metrics-port",
            "0",
            "--master",
            "local[2]",
        ],
        stdout=subprocess.DEVNULL,
        stderr=open(tmp / "stream.log", "ab"),
    )


def failure(log: Path) -> str:
    """The first error lines of the job's log and its tail (Spark's plan dump hides the cause)."""
    text = log.read_text(errors="replace")
    causes = [ln for ln in text.splitlines() if "Error" in ln or "kafka:" in ln][:5]
    return "\n".join(causes) + "\n...\n" + text[-2000:]


def wait_archive(
    tmp: Path, predicate: Any, proc: subprocess.Popen[bytes], timeout_s: float
) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, failure(tmp / "stream.log")
        if predicate(read_windows(tmp / "archive")):
            return
        time.sleep(1)
    raise AssertionError("timed out waiting for the archive")


def test_sigkill_and_restart_counts_every_echo_once(any_broker: Any, tmp_path: Path) -> None:
    broker = any_broker  # the mock, then Tansu
    topic = unique_topic(broker, 2)
    t0 = (int(time.time()) // 60 * 60 - 3600) * 1_000_000
    prod = producer(broker.bootstrap)
    expected: Counter[int] = Counter()

    def send(seqs: range) -> None:
        for seq in seqs:
            at = t0 + seq * 20_000  # 50/s
            expected[at - at % 10_000_000] += 1
            prod.produce(
                topic,
                key=str(seq),
                value=encode_record(
                    Echo("p", "c", "t", seq % 2, 1, seq, 512, at, at + 5, None, at + 777)
                ),
            )
        prod.flush()

    send(range(0, 1500))  # 30 s of echoes
    proc = stream(broker.bootstrap, topic, tmp_path)
    try:
        wait_archive(tmp_path, lambda ws: len(ws) >= 4, proc, 180)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        send(range(1500, 3000))  # 30 s more while the job is dead
        pusher = t0 + 600_000_000
        prod.produce(
            topic,
            value=encode_record(
                Echo("p", "c", "pusher", 0, 1, 0, 512, pusher, pusher, None, pusher + 1)
            ),
        )
        prod.flush()
        proc = stream(broker.bootstrap, topic, tmp_path)
        data_windows = set(expected)
        wait_archive(
            tmp_path,
            lambda ws: data_windows <= {w.window_start_us for w in ws if w.series.topic == "t"},
            proc,
            180,
        )
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    assert_exactly_once(archived(tmp_path / "archive"), expected)
