"""Cluster operations on Apache Kafka, as operators run them, under a running probe.

- ``--manage-topic`` for real: the probe creates both topics; a broker joins (``ctl
  add-broker``); the probe adds a partition the new broker leads through CreatePartitions,
  which neither the mock nor Tansu can do, and probes it.
- A rolling restart of all three brokers, one at a time, each a clean shutdown and a restart on
  its own log directory: every message is accounted for (sent = measured + counted lost), and
  the echoes' send-time leaders show which broker was restarting.

Each test gets its own cluster: both change the set of brokers or who leads.
"""

from __future__ import annotations

import sys
import threading
import time
import traceback
import uuid

from confluent_kafka.admin import AdminClient
from probe_runs import RATE, assert_one_echo_per_message, records_of, until

import probes.agent
from probes import ProbeAgent, ProbeConfig
from testbroker import EmbeddedBroker


def threads_now() -> str:
    """Where each of this process's threads is (for a failure message: what waited)."""
    names = {t.ident: t.name for t in threading.enumerate()}
    return "\n".join(
        f"{names.get(ident)}: {''.join(traceback.format_stack(frame, limit=3))}"
        for ident, frame in sys._current_frames().items()
    )


def topics(cluster: EmbeddedBroker) -> dict:
    return AdminClient({"bootstrap.servers": cluster.bootstrap}).list_topics(timeout=10).topics


def test_manage_topic_creates_topics_and_covers_a_joining_broker(require_kafka_jars: None) -> None:
    tag = uuid.uuid4().hex[:6]
    probe_topic, echo_topic = f"mt.probe.{tag}", f"mt.echoes.{tag}"
    with EmbeddedBroker(engine="kafka", brokers=2) as cluster:
        assert not {probe_topic, echo_topic} & set(topics(cluster))
        agent = ProbeAgent(
            ProbeConfig(
                bootstrap=cluster.bootstrap,
                topic=probe_topic,
                echo_topic=echo_topic,
                rate=RATE,
                cluster="mt",
                probe_id=f"mt-{tag}",
                metrics_port=0,
                manage_topic=True,
                manage_interval=0.5,
            )
        ).start()
        try:
            found = topics(cluster)
            assert len(found[probe_topic].partitions) == 2  # one a broker
            assert [len(p.replicas) for p in found[probe_topic].partitions.values()] == [2, 2]
            assert agent.stats()["brokers_unprobed"] == 0

            assert cluster.add_broker() == 3  # a new JVM joins the KRaft cluster
            until(lambda: agent.stats()["brokers"] == 3)
            # CreatePartitions: a partition for the new broker, led by it, probed
            until(lambda: len(topics(cluster)[probe_topic].partitions) == 3)
            until(
                lambda: agent.partitions == [0, 1, 2] and agent.stats()["brokers_unprobed"] == 0,
                why=lambda: (agent.partitions, agent.stats()),
            )
            leaders = {p.id: p.leader for p in topics(cluster)[probe_topic].partitions.values()}
            assert leaders[2] == 3, leaders
            assert agent.stats()["admin_errors"] == {}
            # The new partition is read back by a consumer of its own (probes/kafka.py:
            # add_receiver): its messages flow, each measured once.
            until(
                lambda: agent.stats()["partitions"].get(2, {}).get("received", 0) >= RATE,
                why=lambda: (agent.stats(), threads_now()),
            )
        finally:
            agent.stop()
        # Every message, the new partition's too, is accounted for: one echo each.
        stats = agent.stats()
        echoes, _ = records_of(cluster.bootstrap, f"mt-{tag}", topic=echo_topic)
        n = assert_one_echo_per_message(echoes, 3)
        assert n == {p: stats["partitions"][p]["sent"] for p in (0, 1, 2)}
        assert not [e for e in echoes if e.lost]


def test_rolling_restart_accounts_for_every_message(
    require_kafka_jars: None, monkeypatch: object
) -> None:
    monkeypatch.setattr(probes.agent, "METADATA_REFRESH_S", 0.5)  # type: ignore[attr-defined]
    name = f"rr-{uuid.uuid4().hex[:6]}"
    topics_ = [("nines.probe", 3, 3), ("nines.echoes", 2, 3)]
    with EmbeddedBroker(engine="kafka", brokers=3, topics=topics_) as cluster:
        agent = ProbeAgent(
            ProbeConfig(
                bootstrap=cluster.bootstrap,
                rate=RATE,
                cluster=name,
                probe_id=name,
                metrics_port=0,
                loss_timeout="10s",
            )
        ).start()
        restarts: dict[int, tuple[int, int]] = {}
        try:
            time.sleep(3)
            for broker in (1, 2, 3):  # one at a time, each back in the ISR before the next
                cluster.down(broker)  # returns once its JVM has exited
                gone_us = agent.clock.now_us()
                time.sleep(3)
                restarts[broker] = (gone_us, agent.clock.now_us())
                cluster.up(broker)
                until(lambda: all(len(p.isrs) == 3 for p in
                                  topics(cluster)["nines.probe"].partitions.values()))  # fmt: skip
            time.sleep(3)
        finally:
            agent.stop()
        stats = agent.stats()
        echoes, _ = records_of(cluster.bootstrap, name)
    sent = sum(p["sent"] for p in stats["partitions"].values())
    lost = [e for e in echoes if e.lost]
    measured = [e for e in echoes if not e.lost]
    n = assert_one_echo_per_message(echoes, 3)  # one echo for every message, no duplicates
    assert sum(n.values()) == sent == len(measured) + len(lost)
    assert sum(p["lost"] for p in stats["partitions"].values()) == len(lost)
    assert agent.unresolved_at_stop == 0
    # While a broker was down it led nothing: no message sent in that span (after the probe's
    # next metadata refresh) names it; its partitions name the brokers that took over
    for broker, (gone_us, up_us) in restarts.items():
        inside = [e for e in echoes if gone_us + 1_000_000 <= e.intended_us <= up_us]
        assert inside and broker not in {e.leader for e in inside}, broker
    worst_s = max(e.end_to_end_us for e in measured) / 1e6
    print(f"\nrolling restart of 3 brokers: sent={sent} measured={len(measured)} "
          f"lost={len(lost)}; worst e2e {worst_s:.3f} s; restarts (s): "
          f"{ {b: round((u - d) / 1e6, 1) for b, (d, u) in restarts.items()} }")  # fmt: skip
