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

import contextlib
import os
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path
from typing import Any

from full_disk import fill, grow, tmpfs
from kafka_cluster import unique_topic
from stream_jobs import archived as archived_e2e
from stream_jobs import assert_exactly_once, push, send, stream_cli
from test_stream_failures import TRACES

from testkit.archive import read_windows

#: The tmpfs the job fills (the issue's size), the one under Spark's state, and what they grow to.
SIZE, STATE_SIZE, GROWN = "2m", "1m", "64m"
WINDOW_US = 10_000_000


def wait_archive(archive: Path, proc: subprocess.Popen[bytes], log: Path, until: Any) -> None:
    deadline = time.monotonic() + 240
    while not until(read_windows(archive) if archive.exists() else []):
        assert proc.poll() is None, log.read_text(errors="replace")[-3000:]
        assert time.monotonic() < deadline, log.read_text(errors="replace")[-3000:]
        time.sleep(0.5)


def archived(starts: set[int]) -> Any:
    """Whether the archive holds the data windows that start at ``starts``."""
    return lambda ws: starts <= {w.window_start_us for w in ws if w.series.topic == "t"}


def stopped_in_one_line(proc: subprocess.Popen[bytes], log: Path, full: str) -> str:
    """The job ended on the full disk: exit 1, no frame, the last line naming it and ``full``
    (the fields and path of the full file system); that line."""
    rc = proc.wait(180)
    err = log.read_text(errors="replace")
    assert rc == 1, err[-3000:]
    assert not [t for t in TRACES if t in err], err[-5000:]
    last = err.splitlines()[-1]
    assert "the query stopped: " in last and "No space left on device" in last, err[-3000:]
    assert "Py4JJavaError" not in last  # the line: "An error occurred while calling"
    assert f"the disk is full: {full}: " in last and " free of " in last, last
    print(f"stderr {len(err.splitlines())} lines, the last: {last}")
    return last


def test_a_full_disk_stops_in_one_line_and_the_restart_is_exactly_once(
    broker: Any, tmp_path: Path
) -> None:
    """Twice: Spark's state alone full (its own tmpfs under the checkpoint: the state store's
    commit fails, the issue's refused restart), then the whole disk (checkpoint, archive and
    Spark's log: the driver's offset log fails first)."""
    topic = unique_topic(broker, 2)
    t0 = (int(time.time()) // 60 * 60 - 3600) * 1_000_000
    expected: Counter[int] = Counter()
    send(broker.bootstrap, topic, range(0, 1500), t0, expected)  # 30 s of echoes, 50/s
    log = tmp_path / "stream.log"
    with contextlib.ExitStack() as mounts:
        disk = mounts.enter_context(tmpfs(tmp_path / "disk", SIZE))
        ckpt, archive, spark_log = disk / "ckpt", disk / "archive", disk / "spark.log"
        state = mounts.enter_context(tmpfs(ckpt / "state", STATE_SIZE))
        flags = ("--spark-log", str(spark_log))
        proc = stream_cli(broker.bootstrap, topic, disk, log, *flags)
        try:
            wait_archive(archive, proc, log, archived({t0, t0 + WINDOW_US}))
            fill(state)
            send(broker.bootstrap, topic, range(1500, 2250), t0, expected)  # 15 s more
            stopped_in_one_line(proc, log, f"stream.checkpoint ({state})")
            # what the restart used to refuse as damage: the failed commit's temporary files
            left = sorted(str(p.relative_to(ckpt)) for p in state.rglob(".*.changelog.*.tmp"))
            assert left, sorted(str(p.relative_to(ckpt)) for p in state.rglob("*"))
            print(f"left by the failed commit: {left}")

            grow(state, GROWN)  # the restart used to be refused here, for good
            proc = stream_cli(broker.bootstrap, topic, disk, log, *flags)
            wait_archive(archive, proc, log, archived({t0 + i * WINDOW_US for i in range(4)}))
            fill(disk)
            send(broker.bootstrap, topic, range(2250, 3000), t0, expected)  # to 60 s
            stopped_in_one_line(
                proc,
                log,
                f"stream.checkpoint and stream.archive and stream.spark_log ({ckpt})",
            )

            grow(disk, GROWN)
            push(broker.bootstrap, topic, t0 + 600_000_000)  # closes every window
            proc = stream_cli(broker.bootstrap, topic, disk, log, *flags)
            wait_archive(archive, proc, log, archived(set(expected)))
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(60) == 0, log.read_text(errors="replace")[-3000:]
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(30)
        windows = archived_e2e(archive)  # read before the tmpfs goes
    assert_exactly_once(windows, expected)
