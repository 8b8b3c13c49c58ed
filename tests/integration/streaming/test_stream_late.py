"""Late echoes are exact: counted once, in no window, so every resolution sees the same echoes.

The subtle case: an echo whose 10 s window has closed while its 1 m window is still open. Spark
alone would drop it from the 10 s window (silently) and add it to the 1 m one, and the minute
would no longer be the merge of its six 10 s windows. The source marks it late instead.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from kafka_cluster import producer, unique_topic
from stream_jobs import Collector, job_config

from core.echo import Echo, Hiccup, encode_record
from core.windows import merge_all
from streaming.job import StreamJob

#: A minute boundary in 2027, so the test data's windows are easy to name.
T0 = 1_700_000_000_000_000 - 1_700_000_000_000_000 % 60_000_000  # in the past: see max_clock_skew


def echo(seq: int, at_us: int, latency_us: int, topic: str = "probe") -> bytes:
    return encode_record(
        Echo("p", "c", topic, seq % 2, 1, seq, 1, at_us, at_us + 3, None, at_us + latency_us)
    )


def test_late_echoes_are_counted_once_and_resolutions_stay_consistent(
    broker: Any, spark: Any, tmp_path: Any
) -> None:
    topic = unique_topic(broker, 2)
    rng = np.random.default_rng(5)
    prod = producer(broker.bootstrap)
    on_time: list[tuple[int, int, int]] = []  # (seq, intended_us, latency_us)

    def send(items: list[tuple[int, int, int]], pusher_at_us: int) -> None:
        for seq, at, lat in items:
            prod.produce(topic, echo(seq, at, lat))
        prod.produce(topic, echo(0, pusher_at_us, 1, topic="pusher"))
        prod.flush()

    # phase 1: the first 30 s of a minute; the pusher closes its three 10 s windows (not the 1 m)
    phase1 = [(i, T0 + i * 100_000, int(rng.lognormal(8, 1)) + 1) for i in range(300)]
    on_time += phase1
    send(phase1, T0 + 35_000_000)
    sink = Collector(keep=lambda w: w.series.topic == "probe")
    job = StreamJob(
        job_config(
            broker.bootstrap,
            topic,
            windows="10s,1m",
            trigger="200ms",
            checkpoint=str(tmp_path / "ckpt"),
        ),
        spark=spark,
        on_batch=sink,
    ).start()
    try:
        sink.wait(lambda s: sum(w.resolution == "10s" for w in s.windows) >= 3 * 2 * 2, job=job)
        assert not any(w.resolution == "1m" for w in sink.windows)  # the minute is still open
        # phase 2: echoes for closed 10 s windows inside the open minute (late), and on-time ones
        late = [(1000 + i, T0 + 15_000_000 + i * 1000, 5_000_000) for i in range(7)]
        late += [(2000, T0 + 29_999_999, 4_000_000)]  # last microsecond of a closed window
        phase2 = [(3000 + i, T0 + 40_000_000 + i * 100_000, 2000 + i) for i in range(150)]
        on_time += phase2
        late_hiccup = Hiccup("p", "c", T0 + 12_000_000, T0 + 13_000_000, 900, 900, 1000)
        prod.produce(topic, encode_record(late_hiccup))
        send(late + phase2, T0 + 200_000_000)
        sink.wait(
            lambda s: any(w.resolution == "1m" for w in s.windows) and s.counters.late, job=job
        )
        progress = list(job.query.recentProgress)
    finally:
        job.stop()

    late_by_partition = {
        ("c", "probe", str(p)): sum(1 for seq, _, _ in late if seq % 2 == p) for p in (0, 1)
    }
    late_by_partition[("c", "", "all")] = 1  # the probe's own late hiccup record
    assert sink.counters.late == late_by_partition
    dropped = sum(
        op.get("numRowsDroppedByWatermark", 0)
        for p in progress
        for op in p.get("stateOperators", [])
    )
    assert dropped == 0  # Spark itself dropped nothing silently
    for partition in ("0", "1"):
        series = [w for w in sink.windows if w.series.partition == partition]
        e2e = [w for w in series if w.series.kind == "e2e"]
        minute = next(w for w in e2e if w.resolution == "1m")
        tens = [w for w in e2e if w.resolution == "10s"]
        assert len(tens) == 5  # [0,10) [10,20) [20,30) [40,50) [50,60): no echo in [30,40)
        merged = merge_all(tens)
        assert np.array_equal(minute.hist.index, merged.hist.index)
        assert np.array_equal(minute.hist.count, merged.hist.count)
        assert minute.hist.max_us == merged.hist.max_us < 4_000_000  # no late echo in it
        mine = [lat for seq, _, lat in on_time if seq % 2 == int(partition)]
        assert minute.hist.total == len(mine) and minute.hist.max_us == max(mine)
