"""`nines stream` on a real Spark standalone cluster: a master and two workers on loopback.

The oracle holds (every window's histogram exact), and a worker SIGKILLed mid-run changes no
count: Spark re-runs the lost tasks on the other worker, and the state's exactly-once holds.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from kafka_cluster import producer, unique_topic

from bench.spark_cluster import StandaloneCluster, loopback_env
from core.echo import Echo, encode_record
from core.hdr import HdrLayout, SparseHistogram
from testkit.archive import read_windows

LAYOUT = HdrLayout()
RATE = 50  # echoes per second per partition


@pytest.fixture
def cluster(tmp_path: Path) -> Any:
    c = StandaloneCluster(tmp_path / "spark", workers=2, cores=1)
    try:
        c.start()
        yield c
    finally:
        c.stop()


def stream(bootstrap: str, topic: str, tmp: Path, master: str) -> subprocess.Popen[bytes]:
    args = ["--bootstrap", bootstrap, "--echo-topic", topic, "--windows", "10s,1m",
            "--watermark", "1s", "--trigger", "1s", "--starting-offsets", "earliest",
            "--checkpoint", str(tmp / "ckpt"), "--archive", str(tmp / "archive"),
            "--metrics-port", "0", "--master", master]  # fmt: skip
    return subprocess.Popen(
        [sys.executable, "-m", "monitor", "stream", *args],
        stdout=subprocess.DEVNULL,
        stderr=open(tmp / "stream.log", "ab"),
        env=loopback_env(),
    )


def wait_archive(tmp: Path, predicate: Any, proc: subprocess.Popen[bytes], timeout_s: float) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, (tmp / "stream.log").read_text(errors="replace")[-3000:]
        windows = read_windows(tmp / "archive")
        if predicate(windows):
            return windows
        time.sleep(1)
    raise AssertionError(f"timed out: {(tmp / 'stream.log').read_text(errors='replace')[-2000:]}")


def test_standalone_cluster_oracle_and_a_killed_worker(
    broker: Any, cluster: StandaloneCluster, tmp_path: Path
) -> None:
    topic = unique_topic(broker, 2)
    t0 = (int(time.time()) // 60 * 60 - 3600) * 1_000_000
    rng = np.random.default_rng(11)
    prod = producer(broker.bootstrap)
    values: dict[tuple[str, int, str], list[int]] = defaultdict(list)

    def send(seconds: range) -> None:
        for s in seconds:
            for p in range(2):
                for i in range(RATE):
                    at = t0 + s * 1_000_000 + i * 1_000_000 // RATE + p
                    lat = int(rng.lognormal(8.5, 1.0)) + 1
                    for res, span in (("10s", 10_000_000), ("1m", 60_000_000)):
                        values[(res, at - at % span, str(p))].append(lat)
                    echo = Echo("p", "c", "t", p, 1, s * RATE + i, 512, at, at + 5, None, at + lat)
                    prod.produce(topic, partition=p, value=encode_record(echo))
        prod.flush()

    send(range(0, 60))
    proc = stream(broker.bootstrap, topic, tmp_path, cluster.url)
    try:
        wait_archive(tmp_path, lambda ws: len(ws) >= 4, proc, 300)
        send(range(60, 120))  # a second minute, read while a worker dies
        cluster.kill_worker(0)
        pusher = t0 + 600_000_000
        echo = Echo("p", "c", "pusher", 0, 1, 0, 512, pusher, pusher, None, pusher + 1)
        prod.produce(topic, value=encode_record(echo))
        prod.flush()
        keys = set(values)
        windows = wait_archive(
            tmp_path,
            lambda ws: (
                keys
                <= {
                    (w.resolution, w.window_start_us, w.series.partition)
                    for w in ws
                    if w.series.topic == "t" and w.series.kind == "e2e"
                }
            ),
            proc,
            300,
        )
    finally:
        proc.terminate()
        proc.wait(60)
    got = [w for w in windows if w.series.topic == "t" and w.series.kind == "e2e"]
    seen = [(w.resolution, w.window_start_us, w.series.partition) for w in got]
    assert len(seen) == len(set(seen)), "a window emitted twice"
    for w in got:
        ref = SparseHistogram.from_values(LAYOUT, values[seen[got.index(w)]])
        assert np.array_equal(w.hist.index, ref.index), w
        assert np.array_equal(w.hist.count, ref.count), w
        assert w.hist.max_us == ref.max_us
    assert sum(w.hist.total for w in got if w.resolution == "1m") == 120 * 2 * RATE
