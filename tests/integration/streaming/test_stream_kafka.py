"""Apache Kafka, three KRaft brokers: one broker stalled (CTRL+Z on its JVM), a stalled
follower under ``acks=all``, and a real leader move, each through the probe and the Spark job.

The session's cluster (``kafka_broker``) serves every test here: each test probes its own
topics, so the brokers' state that one test changes (a leader) is nobody else's. A stall of a
few seconds stays under the brokers' 9 s session timeout, so no leadership changes with it.
"""

from __future__ import annotations

import os
import signal
import time
import uuid
from typing import Any

import numpy as np
from kafka_cluster import producer, unique_topic
from probe_runs import RATE, assert_one_echo_per_message, records_of, slots_before
from stream_jobs import Collector, job_config

import probes.agent
from core.echo import Echo, encode_record
from core.hdr import HdrLayout, SparseHistogram
from core.windows import WindowHistogram, merge_all
from probes import ProbeAgent, ProbeConfig
from streaming.job import StreamJob
from testbroker import EmbeddedBroker
from testbroker.process import stop_and_wait

LAYOUT = HdrLayout()
#: The stall: long enough to stand far above the floor, short of the 9 s session timeout.
STALL_S = 4.0


def leaders_of(cluster: EmbeddedBroker, topic: str) -> dict[int, int]:
    from confluent_kafka.admin import AdminClient

    md = AdminClient({"bootstrap.servers": cluster.bootstrap}).list_topics(topic, timeout=10)
    return {p.id: p.leader for p in md.topics[topic].partitions.values()}


def start_probe(cluster: EmbeddedBroker, topic: str, echo_topic: str, name: str) -> ProbeAgent:
    cfg = ProbeConfig(
        bootstrap=cluster.bootstrap, topic=topic, echo_topic=echo_topic, rate=RATE,
        metrics_port=0, probe_id=name, cluster=name, loss_timeout="30s",
    )  # type: ignore[call-arg]  # fmt: skip
    agent = ProbeAgent(cfg).start()
    deadline = time.monotonic() + 30
    while sum(p["received"] for p in agent.stats()["partitions"].values()) < RATE:
        assert time.monotonic() < deadline, "the probe's messages do not come back"
        time.sleep(0.1)
    return agent


def stall_one(cluster: EmbeddedBroker, agent: ProbeAgent, broker: int) -> tuple[int, int]:
    """SIGSTOP broker ``broker``'s JVM (its pid from ``ctl pid``) for STALL_S; the stall's
    bounds on the probe's clock: stopped from just after SIGSTOP until just before SIGCONT."""
    pid = cluster.broker_pid(broker)
    time.sleep(3)
    stop_and_wait([pid], lambda: os.kill(pid, signal.SIGSTOP))  # every thread stopped
    t_stop = agent.clock.now_us()
    try:
        time.sleep(STALL_S)
        t_resume = agent.clock.now_us()
    finally:
        os.kill(pid, signal.SIGCONT)
    time.sleep(4)
    agent.stop()
    return t_stop, t_resume


def stalled_keys(agent: ProbeAgent, partitions: list[int], t_stop: int, t_resume: int) -> list:
    sched = agent.schedule
    return [
        (p, k)
        for p in partitions
        for k in range(slots_before(sched, p, t_stop), slots_before(sched, p, t_resume))
    ]


def floor_p99_s(echoes: list[Echo], t_stop: int, t_resume: int) -> float:
    """This run's p99 away from the stall and its edges (seconds): the allowance above the
    arithmetic is 1 s plus it (a backlog drains after SIGCONT on a shared 2-core machine)."""
    away = [e.end_to_end_us for e in echoes
            if not t_stop - 500_000 <= e.intended_us < t_resume + 500_000]  # fmt: skip
    return float(np.quantile(np.array(away) / 1e6, 0.99))


def check_stall_carried(
    echoes: list[Echo], keys: list, t_stop: int, t_resume: int, above_s: float
) -> None:
    """Every message intended during the stall waited out the rest of it, exactly as the
    arithmetic says: back no earlier than SIGCONT, and not much later."""
    by_key = {(e.partition, e.seq): e for e in echoes}
    per_partition: dict[int, int] = {}
    for p, _ in keys:
        per_partition[p] = per_partition.get(p, 0) + 1
    for p, n in per_partition.items():
        assert abs(n - RATE * (t_resume - t_stop) / 1e6) <= 1, (p, n)
    for key in keys:
        e = by_key[key]
        assert not e.lost and e.received_us is not None, e
        assert e.received_us >= t_resume, e  # nothing comes back from a stopped broker
        assert e.received_us - t_resume <= above_s * 1e6, (e.received_us - t_resume) / 1e6


def closed_windows(spark: Any, cluster: EmbeddedBroker, echo_topic: str, n: int, name: str):
    """Run the Spark job over ``echo_topic`` until every one of the ``n`` echoes is in a closed
    10 s window (an echo far ahead closes them); its windows."""
    echoes, _ = records_of(cluster.bootstrap, name, topic=echo_topic)
    end_us = max(e.intended_us for e in echoes) + 120_000_000
    prod = producer(cluster.bootstrap)
    prod.produce(echo_topic, value=encode_record(
        Echo("p", "pusher", "pusher", 0, 1, 0, 1, end_us, end_us, None, end_us + 100)))  # fmt: skip
    prod.flush()
    sink = Collector()
    job = StreamJob(job_config(cluster.bootstrap, echo_topic), spark=spark, on_batch=sink)

    def total(s: Collector) -> int:
        return sum(
            w.hist.total + w.lost
            for w in s.windows
            if w.series.cluster == name and w.series.kind == "e2e"
            and w.series.partition == "all" and not w.series.broker
        )  # fmt: skip

    job.start()
    try:
        sink.wait(lambda s: total(s) == n, timeout_s=180, job=job)
    finally:
        job.stop()
    return sink.windows


def per_broker(windows: list[WindowHistogram], name: str, echoes: list[Echo]) -> dict:
    """Each broker's windows merged; exactly the echoes naming it as their send-time leader."""
    by_broker: dict[str, list[WindowHistogram]] = {}
    for w in windows:
        s = w.series
        if s.cluster == name and s.kind == "e2e" and s.is_broker and w.resolution == "10s":
            by_broker.setdefault(s.broker, []).append(w)
    out = {}
    for broker, ws in by_broker.items():
        mine = [e for e in echoes if str(e.leader) == broker and not e.lost]
        got = merge_all(ws)
        ref = SparseHistogram.from_values(LAYOUT, [int(e.end_to_end_us) for e in mine])
        assert np.array_equal(got.hist.count, ref.count), broker
        assert got.hist.max_us == ref.max_us, broker
        out[broker] = got
    return out


def test_ctrl_z_on_one_broker_of_three_stalls_its_partitions_and_its_series(
    kafka_broker: EmbeddedBroker, spark: Any
) -> None:
    """RF 1: the broker leading some probe partitions is stopped; those partitions carry the
    stall exactly, the others stay fast, and the per-broker series blame that broker."""
    name = f"kz-{uuid.uuid4().hex[:6]}"
    topic = unique_topic(kafka_broker, 3, replication=1)
    echo_topic = unique_topic(kafka_broker, 2)
    leaders = leaders_of(kafka_broker, topic)
    victim = leaders[0]
    stalled = [p for p, b in leaders.items() if b == victim]
    healthy = [p for p in leaders if p not in stalled]
    assert healthy, f"Kafka put every partition on broker {victim}: {leaders}"

    agent = start_probe(kafka_broker, topic, echo_topic, name)
    t_stop, t_resume = stall_one(kafka_broker, agent, victim)
    echoes, _ = records_of(kafka_broker.bootstrap, name, topic=echo_topic)
    n = assert_one_echo_per_message(echoes, 3)  # nothing missing, nothing twice
    assert n == {p: agent.stats()["partitions"][p]["sent"] for p in range(3)}
    assert not [e for e in echoes if e.lost]
    s = (t_resume - t_stop) / 1e6

    floor_p99 = floor_p99_s(echoes, t_stop, t_resume)
    above_s = 1.0 + floor_p99
    check_stall_carried(echoes, stalled_keys(agent, stalled, t_stop, t_resume), t_stop, t_resume,
                        above_s)  # fmt: skip
    fast = [e.end_to_end_us / 1e6 for e in echoes if e.partition in healthy
            and t_stop <= e.intended_us < t_resume]  # fmt: skip
    assert fast and max(fast) < s / 2, (max(fast), s)
    assert {e.leader for e in echoes if e.partition in stalled} == {victim}

    windows = closed_windows(spark, kafka_broker, echo_topic, len(echoes), name)
    b = per_broker(windows, name, echoes)
    assert str(victim) in b
    assert b[str(victim)].hist.max_us / 1e6 >= s - 1 / RATE, b[str(victim)].hist.max_us
    for broker, w in b.items():
        if broker != str(victim):
            assert w.hist.max_us / 1e6 < s / 2, (broker, w.hist.max_us)
    print(f"\nCTRL+Z broker {victim} of 3 (RF 1): S={s:.3f}s, partitions {stalled} stalled, "
          f"floor p99 {floor_p99 * 1e3:.1f} ms, per-broker max (s): "
          f"{ {k: round(w.hist.max_us / 1e6, 3) for k, w in sorted(b.items())} }, "
          f"healthy partitions' max during the stall {max(fast) * 1e3:.1f} ms")  # fmt: skip


def test_stalled_follower_under_acks_all_shows_under_the_healthy_leaders(
    kafka_broker: EmbeddedBroker,
) -> None:
    """RF 3, acks=all: a stopped follower holds back every acknowledgement of the partitions it
    follows (it stays in the ISR: Kafka waits replica.lag.time.max.ms, 30 s, before dropping it),
    so their messages carry the stall although their leaders are healthy; the echoes name the
    send-time leader, so the stall shows under the healthy leaders' series."""
    name = f"kf-{uuid.uuid4().hex[:6]}"
    topic = unique_topic(kafka_broker, 3)  # RF 3 on three brokers: everyone follows everyone
    echo_topic = unique_topic(kafka_broker, 2)
    leaders = leaders_of(kafka_broker, topic)
    victim = leaders[0]
    followed = [p for p, b in leaders.items() if b != victim]  # victim is only a follower here
    assert followed, leaders

    agent = start_probe(kafka_broker, topic, echo_topic, name)
    t_stop, t_resume = stall_one(kafka_broker, agent, victim)
    echoes, _ = records_of(kafka_broker.bootstrap, name, topic=echo_topic)
    assert_one_echo_per_message(echoes, 3)
    assert not [e for e in echoes if e.lost]
    above_s = 1.0 + floor_p99_s(echoes, t_stop, t_resume)
    keys = stalled_keys(agent, followed, t_stop, t_resume)
    check_stall_carried(echoes, keys, t_stop, t_resume, above_s)
    by_key = {(e.partition, e.seq): e for e in echoes}
    for key in keys:  # the acknowledgement waited for the follower too, not only the fetch
        e = by_key[key]
        assert e.leader != victim and e.acked_us is not None and e.acked_us >= t_resume, e
    print(
        f"\nstalled follower {victim} (RF 3, acks=all): {len(keys)} messages of partitions "
        f"{followed} (leaders {sorted({leaders[p] for p in followed})}) waited for it"
    )


def test_per_broker_latency_through_a_real_leader_move(
    kafka_broker: EmbeddedBroker, spark: Any, monkeypatch: Any
) -> None:
    """A reassignment plus a preferred-leader election moves partition 0; the probe follows,
    the echoes name the leader at send time, and each broker's series is exactly its echoes."""
    monkeypatch.setattr(probes.agent, "METADATA_REFRESH_S", 0.2)
    name = f"km-{uuid.uuid4().hex[:6]}"
    topic = unique_topic(kafka_broker, 3)
    echo_topic = unique_topic(kafka_broker, 2)
    before = leaders_of(kafka_broker, topic)
    target = next(b for b in (1, 2, 3) if b != before[0])

    agent = start_probe(kafka_broker, topic, echo_topic, name)
    time.sleep(2)
    kafka_broker.set_leader(topic, 0, target)
    moved_us = agent.clock.now_us()
    deadline = time.monotonic() + 30
    while agent.leaders.get(0) != target:
        assert time.monotonic() < deadline, "the probe never saw the leader move"
        time.sleep(0.05)
    time.sleep(3)
    agent.stop()
    assert leaders_of(kafka_broker, topic)[0] == target

    echoes, _ = records_of(kafka_broker.bootstrap, name, topic=echo_topic)
    n = assert_one_echo_per_message(echoes, 3)
    lost = [e for e in echoes if e.lost]
    assert agent.stats()["partitions"][0]["lost"] == len(lost)
    p0 = sorted((e for e in echoes if e.partition == 0), key=lambda e: e.seq)
    assert p0[0].leader == before[0] and p0[-1].leader == target
    switch = next(i for i, e in enumerate(p0) if e.leader == target)
    assert all(e.leader == target for e in p0[switch:])  # one move, followed once
    assert p0[switch].intended_us >= moved_us - 5_000_000

    windows = closed_windows(spark, kafka_broker, echo_topic, sum(n.values()), name)
    b = per_broker(windows, name, echoes)
    assert set(b) == {str(x) for x in {e.leader for e in echoes if not e.lost}}
    assert b[str(target)].hist.total >= len(p0) - switch
    print(f"\nleader move {before[0]} -> {target}: {len(p0) - switch} of {len(p0)} messages "
          f"of partition 0 after it, {len(lost)} lost; per-broker totals "
          f"{ {k: w.hist.total for k, w in sorted(b.items())} }")  # fmt: skip
