"""A full disk stops `nines stream` in one line; once space returns, the restart is exactly once.

On a real tmpfs (mounted here: root, as CI runs) holding the checkpoint, the archive and
Spark's log: the job archives its first windows, a filler file takes every free byte, more echoes
arrive, and the next batch cannot write. It stopped with exit 1 and a line naming a py4j call,
74 frames of log4j's appender errors before it; the restart after the disk grew was refused,
a failed commit's temporary file taken for damage. Now: one line naming the full disk and the
fields on it, no frame; after the file system grows, the same checkpoint resumes and every
archived window equals the echoes sent (none lost, none counted twice).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from full_disk import fill, grow, tmpfs
from kafka_cluster import unique_topic
from stream_jobs import push, send, stream_cli
from test_stream_failures import TRACES

from testkit.archive import read_windows

#: The tmpfs the job fills (the issue's size), then what it grows to.
SIZE, GROWN = "2m", "64m"


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[Path]:
    with tmpfs(tmp_path / "disk", SIZE) as where:
        yield where


def wait_archive(archive: Path, proc: subprocess.Popen[bytes], log: Path, until: Any) -> None:
    deadline = time.monotonic() + 240
    while not until(read_windows(archive) if archive.exists() else []):
        assert proc.poll() is None, log.read_text(errors="replace")[-3000:]
        assert time.monotonic() < deadline, log.read_text(errors="replace")[-3000:]
        time.sleep(0.5)


def test_a_full_disk_stops_in_one_line_and_the_restart_is_exactly_once(
    broker: Any, disk: Path, tmp_path: Path
) -> None:
    topic = unique_topic(broker, 2)
    t0 = (int(time.time()) // 60 * 60 - 3600) * 1_000_000
    expected: Counter[int] = Counter()
    send(broker.bootstrap, topic, range(0, 1500), t0, expected)  # 30 s of echoes
    archive, spark_log = disk / "archive", disk / "spark.log"
    log = tmp_path / "stream.log"
    flags = ("--spark-log", str(spark_log))
    proc = stream_cli(broker.bootstrap, topic, disk, log, *flags)
    try:
        wait_archive(archive, proc, log, lambda ws: len(ws) >= 2)
        filler = fill(disk)
        send(broker.bootstrap, topic, range(1500, 3000), t0, expected)  # 30 s more
        rc = proc.wait(180)
        err = log.read_text(errors="replace")
        assert rc == 1, err[-3000:]
        assert not [t for t in TRACES if t in err], err[-5000:]
        last = err.splitlines()[-1]
        assert "the query stopped: " in last and "No space left on device" in last, err[-3000:]
        assert "the disk is full: stream.checkpoint and stream.archive and stream.spark_log" in last
        assert f"({disk / 'ckpt'}): " in last and "free of 2 MiB" in last, last
        left = sorted(p.name for p in (disk / "ckpt").rglob(".*.tmp"))
        print(f"filler {filler} bytes; stderr {len(err.splitlines())} lines; left: {left}")

        grow(disk, GROWN)
        push(broker.bootstrap, topic, t0 + 600_000_000)  # closes every window
        log.write_bytes(b"")
        proc = stream_cli(broker.bootstrap, topic, disk, log, *flags)
        data_windows = set(expected)
        wait_archive(
            archive,
            proc,
            log,
            lambda ws: data_windows <= {w.window_start_us for w in ws if w.series.topic == "t"},
        )
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0, log.read_text(errors="replace")[-3000:]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)
    windows = [w for w in read_windows(archive) if w.series.topic == "t" and w.series.kind == "e2e"]
    seen = Counter((w.window_start_us, w.series.partition) for w in windows)
    assert max(seen.values()) == 1, "a window was archived twice"
    got: Counter[int] = Counter()
    for w in windows:
        got[w.window_start_us] += w.hist.total
    assert got == expected
