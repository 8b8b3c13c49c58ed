"""The series cap of Spark's state: more series than ``max_series`` in, at most the cap in state,
every refused record counted, the admitted series' windows exact, and a replay admits the same."""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
from kafka_cluster import producer, unique_topic
from stream_jobs import Collector, job_config

from core.echo import LATENCY_SPANS, Echo, encode_record
from core.hdr import SparseHistogram
from streaming.job import StreamJob
from streaming.resets import partition_offsets
from testkit.spark import process_all_available

#: A minute boundary an hour ago (event times must not be ahead of the records' timestamps).
T0 = (int(time.time()) // 60 * 60 - 3600) * 1_000_000
CAP = 5
#: Series (echo topics) in the order each Kafka partition holds their records. Quotas of the
#: first batch (id 0): the 5 free places over 2 ranges, the first range taking the odd one;
#: first by offset: s0, s1, s2 | s4, s5.
RECORDS = {
    0: ["s0", "s1", "s2", "s0", "s3", "s1", "s2", "s3", "s0", "s1"],
    1: ["s4", "s5", "s6", "s4", "s6", "s5", "s4"],
}
ADMITTED = {"s0", "s1", "s2", "s4", "s5"}


def echo_at(i: int) -> Echo:
    """The i-th record of the data: distinct latencies, all in the first 10 s window."""
    at = T0 + i * 100_000
    lat = 1000 + 370 * i
    return Echo("p", "c", "", 0, 1, i, 1, at, at + 3 + i, at + lat // 2, at + lat)


def test_state_holds_at_most_max_series_and_a_replay_admits_the_same(
    broker: Any, spark: Any, tmp_path: Path
) -> None:
    topic = unique_topic(broker, 2)
    prod = producer(broker.bootstrap)
    data: dict[str, list[Echo]] = {}
    i = 0
    for kafka_partition, series in RECORDS.items():
        for name in series:
            e = replace(echo_at(i), topic=name)
            data.setdefault(name, []).append(e)
            prod.produce(topic, encode_record(e), partition=kafka_partition)
            i += 1
    prod.flush()
    ckpt = tmp_path / "ckpt"
    config = job_config(
        broker.bootstrap,
        topic,
        windows="10s,1m",
        trigger="200ms",
        checkpoint=str(ckpt),
        max_series=CAP,
    )

    def run_first_batch(sink: Collector) -> int:
        """Start the job, let it take batch 0 (all the records), stop it; its state rows."""
        job = StreamJob(config, spark=spark, on_batch=sink).start()
        try:
            sink.wait(lambda s: 0 in s.ids, 180, job)
            process_all_available(job)
            (first,) = [p for p in job.query.recentProgress if p["batchId"] == 0]
        finally:
            job.stop()
        # batch 0 read every record (Spark's input rows are the combiner's partials, not records)
        (source,) = first["sources"]
        assert sum(partition_offsets(json.loads(source["endOffset"])).values()) == i
        return sum(op["numRowsTotal"] for op in first["stateOperators"])

    first = Collector(keep=lambda w: w.series.partition != "all")
    rows_first = run_first_batch(first)
    # exactly the admitted series' rows: one histogram per (series, kind) in the finest window,
    # whatever its buckets (all the data is in the first 10 s; the minute is merged from closed
    # 10 s windows, none yet), plus the one counted row of the refused records (bad/series_cap),
    histograms = {
        (e.topic, kind) for name in ADMITTED for e in data[name] for kind in LATENCY_SPANS
    }
    # and one row per finest window and series counting its echoes by system (kafka here)
    systems = {(e.topic, e.intended_us // 10_000_000) for name in ADMITTED for e in data[name]}
    assert rows_first == len(histograms) + 1 + len(systems)
    assert first.windows == []  # nothing has closed yet

    # a crash during batch 0: Spark logged its offsets but committed nothing; what the read
    # tasks admitted is gone too, so the replay must decide it again from the checkpoint
    book = ckpt / "nines-series"
    seen = {p.name: p.read_bytes() for p in (book / "seen-0").iterdir()}
    assert sorted(seen) == ["0.json", "1.json"]
    for log in ("offsets", "commits"):
        for p in (ckpt / log).iterdir():
            if p.name.isdigit() and (log == "commits" or int(p.name) > 0):
                p.unlink()
                p.with_name(f".{p.name}.crc").unlink(missing_ok=True)  # Hadoop's checksum
    shutil.rmtree(book / "seen-0")
    replay = Collector(keep=lambda w: w.series.partition != "all")
    assert run_first_batch(replay) == rows_first
    assert {p.name: p.read_bytes() for p in (book / "seen-0").iterdir()} == seen

    # the run goes on: a record of a known series closes the first minute
    pusher = T0 + 70_000_000
    prod.produce(
        topic,
        encode_record(Echo("p", "c", "s0", 0, 1, 99, 1, pusher, pusher, None, pusher + 1)),
        partition=0,
    )
    prod.flush()
    job = StreamJob(config, spark=spark, on_batch=replay).start()
    try:
        replay.wait(lambda s: any(w.resolution == "1m" for w in s.windows), 180, job)
        process_all_available(job)
    finally:
        job.stop()
    refused = sum(len(v) for name, v in data.items() if name not in ADMITTED)
    assert replay.counters.bad == {"series_cap": refused} and refused == 4
    assert {w.series.topic for w in replay.windows} == ADMITTED
    assert replay.counters.echoes == {("c", name, "0"): len(data[name]) for name in ADMITTED}
    for w in replay.windows:
        values = [e.latency_us(w.series.kind) for e in data[w.series.topic]]
        want = SparseHistogram.from_values(config.layout, np.array(values))
        assert (w.window_start_us, w.hist.max_us, w.hist.sum_us) == (T0, max(values), sum(values))
        assert w.hist.index.tolist() == want.index.tolist()  # bucket for bucket
        assert w.hist.count.tolist() == want.count.tolist()
    # one window per admitted series, kind and resolution: each exactly once
    assert len(replay.windows) == len(ADMITTED) * len(LATENCY_SPANS) * 2
