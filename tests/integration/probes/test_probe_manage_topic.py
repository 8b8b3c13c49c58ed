"""``--manage-topic`` against real Kafka-protocol brokers.

Neither test broker can add partitions: librdkafka's mock has no admin API at all and Tansu
implements CreateTopics but not CreatePartitions. So the mock shows a broker joining, the gauges
that make it visible, and a refused CreatePartitions that is counted while the probe goes on
(refusal is what a managed cloud or an ACL answers too); Tansu shows an empty cluster brought
to full coverage by topic creation. Where partitions go is tested in tests/unit/probes.
"""

from __future__ import annotations

import math
import subprocess
import sys
import time
import uuid
from pathlib import Path

from confluent_kafka.admin import AdminClient
from probe_runs import probe_metrics, until

from probes import ProbeAgent, ProbeConfig
from testbroker import EmbeddedBroker
from testbroker.ports import free_port

UNSUPPORTED = ("create_partitions", "_UNSUPPORTED_FEATURE")
ROOT = Path(__file__).resolve().parents[3]


def sent(agent: ProbeAgent) -> int:
    return sum(p["sent"] for p in agent.stats()["partitions"].values())


def test_joined_broker_is_visible_and_a_refused_create_partitions_is_counted() -> None:
    # One partition on two brokers: broker 2 holds a replica but leads nothing, and is nobody's
    # preferred leader, so it will never lead without a new partition.
    topics = [("nines.probe", 1), ("nines.echoes", 1)]
    with EmbeddedBroker(brokers=2, topics=topics) as cluster:
        port = free_port()
        agent = ProbeAgent(
            ProbeConfig(
                bootstrap=cluster.bootstrap,
                rate=100,
                cluster="mt",
                probe_id=f"mt-{uuid.uuid4().hex[:6]}",
                metrics_port=port,
                manage_topic=True,
                manage_interval=0.3,
            )
        ).start()
        started = time.monotonic()
        try:
            until(lambda: agent.stats()["admin_errors"].get(UNSUPPORTED, 0) >= 1, timeout_s=20)
            stats = agent.stats()
            assert (stats["brokers"], stats["brokers_unprobed"]) == (2, 1)

            assert cluster.add_broker() == 3
            cluster.set_leader("nines.probe", 0, 1)  # the mock re-placed replicas and leaders
            until(lambda: agent.stats()["brokers"] == 3, timeout_s=20)
            until(lambda: agent.stats()["brokers_unprobed"] == 2, timeout_s=20)

            metrics = probe_metrics(port)
            assert metrics['nines_probe_brokers{cluster="mt"}'] == 3
            assert metrics['nines_probe_brokers_unprobed{cluster="mt"}'] == 2
            refused = (
                'nines_probe_admin_errors_total{cluster="mt",error="_UNSUPPORTED_FEATURE",'
                'op="create_partitions"}'
            )
            assert metrics[refused] >= 1

            # The probe goes on: still sending, still only the one partition it had.
            before = sent(agent)
            time.sleep(max(0.5, 4.0 - (time.monotonic() - started)))
            assert sent(agent) >= before + 40
            assert agent.partitions == [0]
            # One call at a time, backing off: the waits between tries double from 0.6 s, so k
            # tries take at least 0.3 × (2^k - 2) s; without backoff there would be one per 0.3 s.
            elapsed = time.monotonic() - started
            tries = agent.stats()["admin_errors"][UNSUPPORTED]
            assert 1 <= tries <= math.log2(elapsed / 0.3 + 2) + 1, (tries, elapsed)
            assert agent.manager is not None and agent.manager.failures == tries
        finally:
            agent.stop()
        assert agent.unresolved_at_stop == 0


def test_empty_cluster_gets_both_topics_and_full_coverage_on_tansu(
    fresh_tansu_broker: EmbeddedBroker,
) -> None:
    bootstrap = fresh_tansu_broker.bootstrap
    tag = uuid.uuid4().hex[:6]
    probe_topic, echo_topic = f"mt.probe.{tag}", f"mt.echoes.{tag}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    assert not {probe_topic, echo_topic} & set(admin.list_topics(timeout=10).topics)

    probe_id = f"mt-{uuid.uuid4().hex[:6]}"
    agent = ProbeAgent(
        ProbeConfig(
            bootstrap=bootstrap,
            topic=probe_topic,
            echo_topic=echo_topic,
            rate=100,
            cluster="mt",
            probe_id=probe_id,
            metrics_port=0,
            manage_topic=True,
            partitions_per_broker=2,
            manage_interval=0.3,
            duration=1.0,
        )
    ).start()
    assert agent.wait(20)
    agent.stop()

    topics = admin.list_topics(timeout=10).topics
    assert len(topics[probe_topic].partitions) == 2  # 1 broker × 2
    assert len(topics[echo_topic].partitions) == 2
    assert [len(p.replicas) for p in topics[probe_topic].partitions.values()] == [1, 1]
    stats = agent.stats()
    assert agent.partitions == [0, 1]
    assert (stats["brokers"], stats["brokers_unprobed"]) == (1, 0)
    assert stats["admin_errors"] == {}
    assert all(p["sent"] >= 90 and p["lost"] == 0 for p in stats["partitions"].values())
    assert stats["echoes_published"] >= 180


def test_cli_manage_topic_where_creation_is_refused_exits_2_with_one_line(
    fresh_broker: EmbeddedBroker,
) -> None:
    broker = fresh_broker
    # The mock has no admin API: like an ACL or a managed cloud, it refuses CreateTopics.
    missing = f"mt.missing.{uuid.uuid4().hex[:6]}"
    argv = [sys.executable, "-m", "monitor", "probe", "--bootstrap", broker.bootstrap]
    argv += ["--topic", missing, "--metrics-port", "0", "--manage-topic", "--duration", "1s"]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert out.returncode == 2, out.stderr
    last = out.stderr.strip().splitlines()[-1]
    assert f"topic: '{missing}' is missing on {broker.bootstrap}: _UNSUPPORTED_FEATURE" in last
    assert out.stderr.strip().splitlines() == [last]  # the refusal is said once, here
    # without --manage-topic nothing is asked: the old one-line hint
    out = subprocess.run(
        argv[:-3] + argv[-2:], capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    assert out.returncode == 2 and "unknown topic" in out.stderr.strip().splitlines()[-1]


def test_elections_only_under_rebalance_on_a_real_broker() -> None:
    # The mock refuses every admin call and the probe counts each refusal, so the counters show
    # every call the probe made. The one partition's preferred leader (its first replica) is
    # broker 1; led by broker 2, it leaves broker 1 unprobed: a restart, not a join, so no new
    # partition, and an election only under --rebalance.
    with EmbeddedBroker(brokers=2, topics=[("nines.probe", 1), ("nines.echoes", 1)]) as cluster:
        cluster.set_leader("nines.probe", 0, 2)
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        found = admin.list_topics("nines.probe", timeout=10).topics["nines.probe"].partitions
        assert (found[0].leader, found[0].replicas) == (2, [1, 2])
        for rebalance in (False, True):
            agent = ProbeAgent(
                ProbeConfig(
                    bootstrap=cluster.bootstrap,
                    rate=50,
                    cluster="mt",
                    probe_id=f"mt-{uuid.uuid4().hex[:6]}",
                    metrics_port=0,
                    manage_topic=True,
                    rebalance=rebalance,
                    manage_interval=0.2,
                )
            ).start()
            try:
                time.sleep(1.5)
                stats = agent.stats()
            finally:
                agent.stop()
            assert (stats["brokers"], stats["brokers_unprobed"]) == (2, 1)
            if rebalance:
                assert set(stats["admin_errors"]) == {("elect_leaders", "_UNSUPPORTED_FEATURE")}
            else:
                assert stats["admin_errors"] == {}  # not a single admin call
