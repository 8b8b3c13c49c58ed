"""The stream job against an oracle: known echoes in, exact histograms and honest counts out."""

from __future__ import annotations

import time
from collections import defaultdict
from typing import Any

import numpy as np
from kafka_cluster import consumer, producer, unique_topic
from stream_jobs import Collector, job_config

from core.echo import Echo, Hiccup, encode_record
from core.hdr import HdrLayout, SparseHistogram, rank_for_quantile
from streaming.job import StreamJob
from testkit.spark import process_all_available

LAYOUT = HdrLayout()
RATE = 50  # per partition per second
MINUTES = 2


def dataset(t0_us: int) -> tuple[list[Echo], list[Hiccup]]:
    """Heavy-tailed latencies, rare multi-second hiccups, some lost messages."""
    rng = np.random.default_rng(42)
    echoes = []
    for p in range(3):
        for seq in range(RATE * 60 * MINUTES):
            it = t0_us + seq * 1_000_000 // RATE + p * 1000
            lat = int(rng.lognormal(8.5, 1.0)) + 1
            if rng.random() < 0.002:
                lat = int(rng.uniform(2e6, 6e6))  # a multi-second hiccup
            lost = rng.random() < 0.001
            echoes.append(
                Echo(
                    "p1",
                    "c",
                    "nines.probe",
                    p,
                    p + 1,
                    seq,
                    512,
                    it,
                    it + 20,
                    it + lat // 2,
                    None if lost else it + lat,
                    lost,
                    30_000_000 if lost else None,
                )
            )
    hiccups = [
        Hiccup(
            "p1",
            "c",
            t0_us + s * 1_000_000,
            t0_us + (s + 1) * 1_000_000,
            int(rng.integers(50, 5000)),
            10_000,
            990,
        )
        for s in range(60 * MINUTES)
    ]
    return echoes, hiccups


def exact_windows(echoes: list[Echo], span_us: int, t0_us: int) -> dict[tuple[int, str], list[int]]:
    out: dict[tuple[int, str], list[int]] = defaultdict(list)
    for e in echoes:
        start = e.intended_us - (e.intended_us % span_us)
        out[(start, str(e.partition))].append(e.end_to_end_us)  # type: ignore[arg-type]
        out[(start, "all")].append(e.end_to_end_us)  # type: ignore[arg-type]
    return out


def test_oracle_windows_late_and_bad(any_broker: Any, spark: Any) -> None:
    broker = any_broker  # the mock, then Tansu
    topic = unique_topic(broker, 2)
    t0 = (int(time.time()) // 3600 * 3600 - 7200) * 1_000_000  # aligned, two hours ago
    echoes, hiccups = dataset(t0)
    end_us = t0 + MINUTES * 60_000_000
    conf = {"linger.ms": 20, "compression.type": "lz4"}  # batches of many records
    prod = producer(broker.bootstrap, **conf)
    for i, rec in enumerate([*echoes, *hiccups]):
        prod.produce(topic, key=str(i % 7), value=encode_record(rec))
        if i % 5000 == 0:
            prod.poll(0)
    # an echo far past the data moves the watermark so every data window closes
    pusher = Echo(
        "p1",
        "c",
        "pusher",
        0,
        1,
        0,
        512,
        end_us + 300_000_000,
        end_us + 300_000_000,
        None,
        end_us + 300_000_100,
    )
    prod.produce(topic, value=encode_record(pusher))
    prod.flush()
    sink = Collector()
    job = StreamJob(
        job_config(broker.bootstrap, topic, windows="10s,1m"),
        spark=spark,
        on_batch=sink,
    )
    job.start()
    try:
        n_10s = MINUTES * 6
        sink.wait(
            lambda s: (
                sum(
                    1
                    for w in s.windows
                    if w.resolution == "10s"
                    and w.series.kind == "e2e"
                    and w.series.partition == "all"
                    and w.series.topic == "nines.probe"
                )
                >= n_10s
            )
        )
        # now late and malformed records, and another pusher to close the window counting them
        late = Echo(
            "p1",
            "c",
            "nines.probe",
            1,
            2,
            10**6,
            512,
            t0 + 5_000_000,
            t0 + 5_000_100,
            None,
            t0 + 5_000_900,
        )
        for rec in (encode_record(late), encode_record(late), b"{not json", b'{"v": 9}'):
            prod.produce(topic, value=rec)
        prod.flush()
        time.sleep(2)
        pusher2 = Echo(
            "p1",
            "c",
            "pusher",
            0,
            1,
            1,
            512,
            end_us + 600_000_000,
            end_us + 600_000_000,
            None,
            end_us + 600_000_100,
        )
        prod.produce(topic, value=encode_record(pusher2))
        prod.flush()
        sink.wait(lambda s: sum(s.counters.bad.values()) >= 2 and s.counters.late)
        progress = job.query.lastProgress
    finally:
        job.stop()

    windows = {
        (w.resolution, w.window_start_us, w.series.partition, w.series.kind): w
        for w in sink.windows
        if w.series.topic == "nines.probe" and not w.series.broker  # brokers: their own test
    }
    for res, span in (("10s", 10_000_000), ("1m", 60_000_000)):
        exact = exact_windows(echoes, span, t0)
        assert {k for k in windows if k[0] == res and k[3] == "e2e"} == {
            (res, s, p, "e2e") for s, p in exact
        }
        for (start, part), values in exact.items():
            w = windows[(res, start, part, "e2e")]
            ref = SparseHistogram.from_values(LAYOUT, values)
            assert np.array_equal(w.hist.index, ref.index) and np.array_equal(
                w.hist.count, ref.count
            )
            assert w.hist.max_us == max(values)  # the max is exact
            srt = sorted(values)
            for q in (0.5, 0.9, 0.99, 0.999):
                exact_q = srt[rank_for_quantile(q, len(srt)) - 1]
                got = w.hist.value_at_quantile(q)
                assert exact_q <= got <= exact_q * (1 + 2e-3) + 1
            assert w.lost == sum(
                1
                for e in echoes
                if e.lost
                and start <= e.intended_us < start + span
                and part in ("all", str(e.partition))
            )
    # the 1-minute p99.9 is the exact p99.9 of the minute; averaging six 10 s p99.9s is not
    minute = windows[("1m", t0, "all", "e2e")]
    tens = [windows[("10s", t0 + i * 10_000_000, "all", "e2e")] for i in range(6)]
    vals = sorted(e.end_to_end_us for e in echoes if t0 <= e.intended_us < t0 + 60_000_000)
    exact_p999 = vals[rank_for_quantile(0.999, len(vals)) - 1]
    assert exact_p999 <= minute.hist.value_at_quantile(0.999) <= exact_p999 * 1.002 + 1
    averaged = float(np.mean([w.hist.value_at_quantile(0.999) for w in tens]))
    assert abs(averaged - exact_p999) / exact_p999 > 0.05, (averaged, exact_p999)
    # hiccup records form their own series; publish and send lag too
    hiccup = [w for w in sink.windows if w.series.kind == "hiccup" and w.resolution == "1m"]
    assert hiccup and hiccup[0].series.partition == "all"
    assert sum(w.hist.total for w in hiccup) == len(hiccups)
    assert windows[("10s", t0, "0", "send_lag")].hist.max_us == 20
    # late and bad records were counted, not dropped silently; Spark itself dropped nothing
    assert sink.counters.late == {("c", "nines.probe", "1"): 2}
    assert sink.counters.bad == {"not_json": 1, "version": 1}
    dropped = sum(op.get("numRowsDroppedByWatermark", 0) for op in progress["stateOperators"])
    assert dropped == 0
    assert sink.counters.echoes[("c", "nines.probe", "0")] == RATE * 60 * MINUTES


def test_retention_gap_is_counted_and_job_continues(broker: Any, spark: Any, tmp_path: Any) -> None:
    topic = unique_topic(broker, 1)
    t0 = (int(time.time()) // 60 * 60 - 3600) * 1_000_000
    prod = producer(broker.bootstrap, **{"linger.ms": 20})
    cfg = job_config(broker.bootstrap, topic, checkpoint=str(tmp_path / "ckpt"))

    def echo(seq: int, at_us: int) -> bytes:
        return encode_record(
            Echo("p", "c", "gap", 0, 1, seq, 512, at_us, at_us + 5, None, at_us + 900)
        )

    for i in range(100):
        prod.produce(topic, value=echo(i, t0 + i * 10_000))
    prod.flush()
    sink = Collector()
    job = StreamJob(cfg, spark=spark, on_batch=sink).start()
    process_all_available(job)
    job.stop()
    # while the job is down, write far more than the broker retains (~5 MiB per partition)
    pad = "x" * 900
    for i in range(100, 12_100):
        prod.produce(topic, value=echo(i, t0 + i * 10_000)[:-1] + f',"pad":"{pad}"}}'.encode())
        if i % 2000 == 0:
            prod.flush()
    prod.produce(topic, value=echo(99_999, t0 + 600_000_000))
    prod.flush()
    job = StreamJob(cfg, spark=spark, on_batch=sink).start()
    try:
        sink.wait(lambda s: s.counters.data_loss and s.counters.echoes)
    finally:
        job.stop()
    gap = sink.counters.data_loss[(topic, "0")]
    # exactly the offsets retention deleted: from where the first run stopped (100) to the
    # first one the broker still holds
    from confluent_kafka import TopicPartition

    reader = consumer(broker.bootstrap)
    low, high = reader.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    reader.close()
    assert high == 12_101
    assert gap == low - 100 and gap > 1000, (gap, low)
    # the job kept going: the first run's 100 echoes, then every one that survived retention
    # (offsets low..12,099; the pusher's window at 12,100 is still open), measured
    assert sink.counters.echoes == {("c", "gap", "0"): 100 + 12_100 - low}
