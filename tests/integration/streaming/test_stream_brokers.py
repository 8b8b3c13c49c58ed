"""Latency per broker, end to end on the mock cluster: the probe, the echo topic, the Spark job.

Faults are injected on real brokers (RTT, a leader move); the job's per-broker series must be
exactly the echoes grouped by the leader they name, and the slow broker must stand out.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
from confluent_kafka import OFFSET_BEGINNING, TopicPartition
from kafka_cluster import consumer, producer
from stream_jobs import Collector, job_config

import probes.agent
from core.echo import Echo, encode_record
from core.echo_v2 import decode_message
from core.hdr import HdrLayout, SparseHistogram
from core.windows import WindowHistogram, merge_all
from probes import ProbeAgent, ProbeConfig
from streaming.job import StreamJob
from testbroker import EmbeddedBroker

LAYOUT = HdrLayout()
ECHO_TOPIC = "nines.echoes"
PROBE_TOPIC = "nines.probe"
SLOW_MS = 200


def probe(bootstrap: str, cluster: str) -> ProbeAgent:
    """A probe whose series are told apart by ``cluster``. The mock answers a fetch from a slow
    broker with about one produce batch, so echoes through it arrive at ~10/s and the rest are
    still in flight when the probe stops (they have no echo; the test compares with the echoes
    that exist)."""
    cfg = ProbeConfig(
        bootstrap=bootstrap, rate=100, metrics_port=0, probe_id=cluster, cluster=cluster,
        shutdown_timeout="3s",
    )  # type: ignore[call-arg]  # fmt: skip
    return ProbeAgent(cfg).start()


def all_echoes(bootstrap: str, timeout_s: float = 30) -> list[Echo]:
    """Every echo on the echo topic, read to its end (call after the probes stopped)."""
    c = consumer(bootstrap)
    parts = c.list_topics(ECHO_TOPIC, timeout=10).topics[ECHO_TOPIC].partitions
    todo = {}
    for p in parts:
        low, high = c.get_watermark_offsets(TopicPartition(ECHO_TOPIC, p), timeout=10)
        if high > low:
            todo[p] = high
    c.assign([TopicPartition(ECHO_TOPIC, p, OFFSET_BEGINNING) for p in todo])
    out: list[Echo] = []
    deadline = time.monotonic() + timeout_s
    while todo:
        assert time.monotonic() < deadline, f"echo topic not read to its end: {todo}"
        for m in c.consume(2000, 0.5):
            if m.error():
                continue
            if m.offset() >= todo.get(m.partition(), 0) - 1:
                todo.pop(m.partition(), None)
            out += [r for r in decode_message(m.value()) if isinstance(r, Echo)]
    c.close()
    return out


def e2e_us(echoes: list[Echo]) -> list[int]:
    return [int(e.latency_us("e2e")) for e in echoes]  # type: ignore[arg-type]


def assert_exactly_the_echoes_of_each_leader(
    windows: list[WindowHistogram], cluster: str, echoes: list[Echo]
) -> dict[str, WindowHistogram]:
    """Each broker's 10s windows, merged, are exactly the echoes naming it as their leader."""
    by_broker: dict[str, list[WindowHistogram]] = {}
    for w in windows:
        s = w.series
        if s.cluster == cluster and s.kind == "e2e" and s.is_broker and w.resolution == "10s":
            by_broker.setdefault(s.broker, []).append(w)
    assert set(by_broker) == {"1", "2", "3"}, set(by_broker)
    out = {}
    for broker, ws in by_broker.items():
        mine = [e for e in echoes if e.cluster == cluster and str(e.leader) == broker]
        ref = SparseHistogram.from_values(LAYOUT, e2e_us(mine))
        got = merge_all(ws)
        assert np.array_equal(got.hist.index, ref.index), broker
        assert np.array_equal(got.hist.count, ref.count), broker
        assert got.hist.max_us == ref.max_us, broker
        assert got.lost == sum(e.lost for e in mine), broker
        out[broker] = got
    return out


def test_per_broker_series_through_rtt_and_a_leader_move(
    fresh_broker: EmbeddedBroker, spark: Any, monkeypatch: Any
) -> None:
    # the probe follows leader moves from metadata; refresh it often so its view lags little
    monkeypatch.setattr(probes.agent, "METADATA_REFRESH_S", 0.2)
    bootstrap = fresh_broker.bootstrap
    # 1. RTT on broker 2 (it leads partition 1): only broker 2's series rises
    fresh_broker.rtt(2, SLOW_MS)
    rtt = probe(bootstrap, "rtt")
    time.sleep(4)
    rtt.stop()
    fresh_broker.rtt(2, 0)
    # 2. broker 3 (partition 2) is slow; partition 0 moves from broker 1 to broker 3
    fresh_broker.rtt(3, SLOW_MS)
    move = probe(bootstrap, "move")
    time.sleep(3)
    fresh_broker.set_leader(PROBE_TOPIC, 0, 3)
    moved_us = move.clock.now_us()
    deadline = time.monotonic() + 10
    while move.leaders.get(0) != 3:
        assert time.monotonic() < deadline, "the probe never saw the leader move"
        time.sleep(0.01)
    seen_us = move.clock.now_us()
    time.sleep(6)  # echoes through the slow broker come back at ~10/s (see probe())
    move.stop()

    echoes = all_echoes(bootstrap)
    n = {c: sum(1 for e in echoes if e.cluster == c) for c in ("rtt", "move")}
    assert n["rtt"] > 500 and n["move"] > 500, n
    # one echo far ahead closes every window of the data, the minutes included
    end_us = max(e.intended_us for e in echoes)
    pusher = Echo("p", "pusher", "pusher", 0, 1, 0, 1, end_us + 120_000_000,
                  end_us + 120_000_000, None, end_us + 120_000_100)  # fmt: skip
    prod = producer(bootstrap)
    prod.produce(ECHO_TOPIC, value=encode_record(pusher))
    prod.flush()

    sink = Collector()
    job = StreamJob(
        job_config(bootstrap, ECHO_TOPIC, windows="10s,1m"),
        spark=spark,
        on_batch=sink,
    )  # fmt: skip

    def samples(s: Collector, cluster: str, res: str) -> int:
        return sum(
            w.hist.total
            for w in s.windows
            if w.resolution == res
            and w.series.cluster == cluster
            and w.series.kind == "e2e"
            and w.series.partition == "all"
            and not w.series.broker
        )

    job.start()
    try:
        sink.wait(
            lambda s: all(samples(s, c, r) == n[c] for c in n for r in ("10s", "1m")),
            timeout_s=150,
        )
    finally:
        job.stop()
    windows = sink.windows
    assert not [w for w in windows if w.series.is_cell]

    # -- 1. RTT on broker 2 ---------------------------------------------------------------
    assert {e.leader for e in echoes if e.cluster == "rtt" and e.partition == 1} == {2}
    b = assert_exactly_the_echoes_of_each_leader(windows, "rtt", echoes)
    p50 = {k: w.hist.value_at_quantile(0.5) / 1e3 for k, w in b.items()}  # ms
    assert p50["2"] >= SLOW_MS, p50
    assert p50["1"] < SLOW_MS / 2 and p50["3"] < SLOW_MS / 2, p50
    assert b["2"].hist.total == sum(1 for e in echoes if e.cluster == "rtt" and e.partition == 1)
    assert b["2"].hist.total >= 20

    # -- 2. the leader move ---------------------------------------------------------------
    mine = [e for e in echoes if e.cluster == "move"]
    p0 = [e for e in mine if e.partition == 0]
    assert {e.leader for e in p0} == {1, 3}
    b = assert_exactly_the_echoes_of_each_leader(windows, "move", echoes)
    # broker 3 carries the tail of both partitions it led, partition 0's after the move too
    assert b["3"].hist.value_at_quantile(0.5) / 1e3 >= SLOW_MS
    assert b["3"].hist.total == sum(1 for e in mine if e.partition == 2) + sum(
        1 for e in p0 if e.leader == 3
    )
    moved = [e for e in p0 if e.leader == 3]
    assert len(moved) >= 5 and np.median(e2e_us(moved)) / 1e3 >= SLOW_MS, len(moved)
    # broker 1 stays fast: its only slow echoes are those sent between the move and the
    # probe's next metadata refresh (named after the leader the probe knew when it sent)
    assert b["1"].hist.value_at_quantile(0.5) / 1e3 < SLOW_MS / 2
    slow_on_1 = [e for e in p0 if e.leader == 1 and e2e_us([e])[0] >= SLOW_MS * 1000]
    assert all(moved_us - 200_000 <= e.intended_us <= seen_us for e in slow_on_1), [
        (e.intended_us - moved_us) / 1e3 for e in slow_on_1
    ]
    # the partition stays one series per window, both leaders merged: exactly its echoes
    for res in ("10s", "1m"):
        ws = [w for w in windows if w.resolution == res and w.series.cluster == "move"
              and w.series.kind == "e2e" and w.series.partition == "0"]  # fmt: skip
        starts = [w.window_start_us for w in ws]
        assert len(starts) == len(set(starts)), res
        for w in ws:
            inside = [e for e in p0 if w.window_start_us <= e.intended_us < w.window_end_us]
            ref = SparseHistogram.from_values(LAYOUT, e2e_us(inside))
            assert np.array_equal(w.hist.count, ref.count) and w.hist.max_us == ref.max_us
            assert w.lost == sum(e.lost for e in inside)
    # the move happened inside one minute window: one series holding both leaders' echoes
    (minute,) = [w for w in ws if w.window_start_us <= moved_us < w.window_end_us]
    inside = [e for e in p0 if minute.window_start_us <= e.intended_us < minute.window_end_us]
    assert {e.leader for e in inside} == {1, 3} and minute.hist.total == len(inside)
