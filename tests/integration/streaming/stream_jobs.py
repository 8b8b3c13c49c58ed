"""What the stream job's integration tests share: a sink that keeps everything, and the job as
they run it (local[2], a 1 s watermark, every offset from the start)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kafka_cluster import producer
from terminal import group_members

from core.echo import Echo, encode_record
from core.windows import WindowHistogram
from streaming.config import StreamConfig
from streaming.counters import StreamCounters
from streaming.job import StreamJob
from testkit.archive import read_windows
from testkit.sigint import default_sigint

ROOT = Path(__file__).resolve().parents[3]


def stream_cli(
    bootstrap: str, topic: str, tmp: Path, log: Path, *flags: str
) -> subprocess.Popen[bytes]:
    """`nines stream` as a user starts it, in a process group of its own, its stderr to
    ``log``, checkpoint and archive under ``tmp``; ``flags`` added."""
    return subprocess.Popen(
        [sys.executable, "-m", "monitor", "stream", "--bootstrap", bootstrap,
         "--echo-topic", topic, "--windows", "10s", "--watermark", "1s", "--trigger", "500ms",
         "--starting-offsets", "earliest", "--checkpoint", str(tmp / "ckpt"),
         "--archive", str(tmp / "archive"), "--metrics-port", "0", "--master", "local[2]",
         *flags],
        stdout=subprocess.DEVNULL,
        stderr=open(log, "ab"),
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        start_new_session=True,
        preexec_fn=default_sigint,  # as a terminal starts it, however this run was started
    )  # fmt: skip


def send(bootstrap: str, topic: str, seqs: range, t0: int, expected: Counter[int]) -> None:
    """Echoes of topic ``t`` at 50/s from ``t0``, counted per 10 s window in ``expected``."""
    prod = producer(bootstrap)
    for seq in seqs:
        at = t0 + seq * 20_000
        expected[at - at % 10_000_000] += 1
        echo = Echo("p", "c", "t", seq % 2, 1, seq, 512, at, at + 5, None, at + 777)
        prod.produce(topic, key=str(seq), value=encode_record(echo))
    prod.flush()


def push(bootstrap: str, topic: str, at: int) -> None:
    """An echo far ahead on another topic: moves the watermark so every window closes."""
    echo = Echo("p", "c", "pusher", 0, 1, 0, 512, at, at, None, at + 1)
    prod = producer(bootstrap)
    prod.produce(topic, value=encode_record(echo))
    prod.flush()


def archived(archive: Path) -> list[Any]:
    """The data windows of :func:`send`'s topic ``t`` in ``archive`` (none before it exists)."""
    if not archive.exists():
        return []
    return [w for w in read_windows(archive) if w.series.topic == "t" and w.series.kind == "e2e"]


def assert_exactly_once(windows: list[Any], expected: Counter[int]) -> None:
    """Each (window, partition) archived once, and each window's echoes those :func:`send`
    counted: nothing lost, nothing twice, across whatever stopped the job."""
    assert windows, "nothing archived"
    seen = Counter((w.window_start_us, w.series.partition) for w in windows)
    assert max(seen.values()) == 1, "a window was archived twice"
    got: Counter[int] = Counter()
    by_partition: Counter[tuple[int, int]] = Counter()
    for w in windows:
        got[w.window_start_us] += w.hist.total
        by_partition[w.window_start_us, w.series.partition] += w.hist.total
    differ = sorted(w for w in set(got) | set(expected) if got[w] != expected[w])
    assert not differ, "windows (start us: got, expected, got per partition): " + "; ".join(
        f"{w}: {got[w]}, {expected[w]}, {[(p, n) for (s, p), n in by_partition.items() if s == w]}"
        for w in differ
    )


def wait_running(
    predicate: Callable[[], object], proc: subprocess.Popen[bytes], log: Path, timeout_s: float
) -> None:
    """Until ``predicate()``, while the job runs: its exit or the timeout fails with its log."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert proc.poll() is None, log.read_text(errors="replace")[-3000:]
        assert time.monotonic() < deadline, "timed out: " + log.read_text(errors="replace")[-3000:]
        time.sleep(0.5)


def wait_group_gone(proc: subprocess.Popen[bytes], timeout_s: float = 60) -> None:
    """Until every process of the job's group (``stream_cli`` starts one) is gone: Spark's JVM
    outlives the Python driver by a second or more (its shutdown hooks) and plans batches
    meanwhile, so an echo sent "while the job is down" before then may be read by the old JVM,
    a batch the restart replays; with a 1 s watermark a partition read ahead of the other then
    makes the rest late (a CI run lost echoes of the SIGKILL test so)."""
    proc.wait(timeout_s)
    deadline = time.monotonic() + timeout_s
    while left := group_members(proc.pid):
        assert time.monotonic() < deadline, f"the job's processes {left} outlived it"
        time.sleep(0.1)


def job_config(bootstrap: str, topic: str, **overrides: Any) -> StreamConfig:
    """The stream job's config in these tests; ``overrides`` are the keys a test cares about."""
    values: dict[str, Any] = {
        "bootstrap": bootstrap,
        "echo_topic": topic,
        "windows": "10s",
        "watermark": "1s",
        "trigger": "500ms",
        "starting_offsets": "earliest",
        "master": "local[2]",
        "shuffle_partitions": 2,
        **overrides,
    }
    return StreamConfig.model_validate(values)


class Collector:
    """Every closed window (or those ``keep`` accepts), counter and batch id the job hands to its
    sink."""

    def __init__(self, keep: Callable[[WindowHistogram], bool] | None = None) -> None:
        self.keep = keep
        self.windows: list[WindowHistogram] = []
        self.counters = StreamCounters()
        self.ids: list[int] = []
        self.lock = threading.Lock()

    def __call__(self, batch_id: int, windows: list[WindowHistogram], c: StreamCounters) -> None:
        with self.lock:
            self.ids.append(batch_id)
            self.windows += [w for w in windows if self.keep is None or self.keep(w)]
            self.counters = self.counters.merge(c)

    def wait(self, predicate: Any, timeout_s: float = 120, job: StreamJob | None = None) -> None:
        """Until ``predicate(self)``; with ``job``, a failed query fails at once, with its error."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if job is not None:
                assert job.query.exception() is None, job.query.exception()
            with self.lock:
                if predicate(self):
                    return
            time.sleep(0.2)
        raise AssertionError(f"timed out; batches {self.ids}, counters {self.counters}")
