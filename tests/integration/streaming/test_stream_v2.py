"""The stream job on echo format v2: batches of echoes in, the same exact histograms out."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
from kafka_cluster import producer, unique_topic
from stream_jobs import Collector, job_config
from test_stream_oracle import LAYOUT, MINUTES, RATE, dataset, exact_windows

from core.echo import Echo, Hiccup, encode_record
from core.echo_v2 import encode_batch
from core.hdr import SparseHistogram
from streaming.job import StreamJob

BATCH = 100


def pusher(at_us: int, seq: int) -> Echo:
    """An echo far past the data: the watermark passes, and the data's windows close."""
    return Echo("p1", "c", "pusher", 0, 1, seq, 512, at_us, at_us, None, at_us + 100)


def test_v2_batches_give_exact_windows_and_count_late_and_bad_per_record(
    broker: Any, spark: Any
) -> None:
    topic = unique_topic(broker, 2)
    t0 = (int(time.time()) // 3600 * 3600 - 7200) * 1_000_000
    echoes, hiccups = dataset(t0)
    end_us = t0 + MINUTES * 60_000_000
    prod = producer(broker.bootstrap, **{"linger.ms": 20, "compression.type": "lz4"})
    records: list[Echo | Hiccup] = [*echoes, *hiccups]
    for k in range(0, len(records), BATCH):
        prod.produce(topic, key="p1", value=encode_batch(records[k : k + BATCH]))
    bad_order = Echo("p1", "c", "nines.probe", 2, 3, 10**6, 512, t0, t0 - 1, None, t0 + 5)
    extra = Echo("p1", "c", "nines.probe", 2, 3, 10**6 + 1, 512, t0, t0, None, t0 + 7)
    prod.produce(topic, value=encode_batch([bad_order, extra]))  # one bad echo, one good
    prod.produce(topic, value=encode_batch(echoes[:3])[:-1])  # truncated: one bad record
    prod.produce(topic, value=encode_batch([pusher(end_us + 300_000_000, 0)]))
    prod.flush()
    sink = Collector()
    job = StreamJob(
        job_config(broker.bootstrap, topic),
        spark=spark,
        on_batch=sink,
    )
    job.start()
    try:
        sink.wait(
            lambda s: (
                sum(
                    1
                    for w in s.windows
                    if w.series.kind == "e2e"
                    and w.series.partition == "all"
                    and not w.series.broker
                    and w.series.topic == "nines.probe"
                )
                >= MINUTES * 6
            )
        )
        # two late echoes in one v2 batch, next to a v1 record: each is counted as itself
        late = [
            Echo("p1", "c", "nines.probe", 1, 2, 10**7 + i, 512, t0 + 5_000_000,
                 t0 + 5_000_100, None, t0 + 5_000_900)
            for i in range(2)
        ]  # fmt: skip
        prod.produce(topic, value=encode_batch(late))
        prod.produce(topic, value=b"{not json")
        prod.flush()
        time.sleep(2)
        prod.produce(topic, value=encode_record(pusher(end_us + 600_000_000, 1)))
        prod.flush()
        sink.wait(lambda s: sum(s.counters.bad.values()) >= 3 and s.counters.late)
    finally:
        job.stop()

    windows = {
        (w.window_start_us, w.series.partition): w
        for w in sink.windows
        if w.series.topic == "nines.probe" and w.series.kind == "e2e" and not w.series.broker
    }
    exact = exact_windows([*echoes, extra], 10_000_000, t0)
    assert set(windows) == set(exact)
    for key, values in exact.items():
        ref = SparseHistogram.from_values(LAYOUT, values)
        w = windows[key]
        assert np.array_equal(w.hist.index, ref.index) and np.array_equal(w.hist.count, ref.count)
        assert w.hist.max_us == max(values)
    hiccup = [w for w in sink.windows if w.series.kind == "hiccup"]
    assert sum(w.hist.total for w in hiccup) == len(hiccups)
    assert sink.counters.late == {("c", "nines.probe", "1"): 2}
    assert sink.counters.bad == {"order": 1, "bad_length": 1, "not_json": 1}
    assert sink.counters.echoes[("c", "nines.probe", "0")] == RATE * 60 * MINUTES
    assert sink.counters.echoes[("c", "nines.probe", "2")] == RATE * 60 * MINUTES + 1
