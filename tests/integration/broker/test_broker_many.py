"""A mock cluster past 64 brokers: the same leader layout without a leader move per partition."""

from __future__ import annotations

from kafka_cluster import producer

from testbroker import EmbeddedBroker

PROBE = "nines.probe"


def test_a_hundred_brokers_lead_partition_p_on_broker_p_mod_n_plus_1_and_take_a_message() -> None:
    with EmbeddedBroker(brokers=100, topics=[(PROBE, 250)]) as broker:
        prod = producer(broker.bootstrap)
        parts = prod.list_topics(PROBE, timeout=20).topics[PROBE].partitions
        assert [parts[p].leader for p in range(250)] == [p % 100 + 1 for p in range(250)]
        # one replica each: placed by the mock, not moved 250 times (each move can take ~1 s)
        assert all(len(parts[p].replicas) == 1 for p in range(250))
        done: list[object] = []
        prod.produce(PROBE, b"x", partition=249, on_delivery=lambda e, m: done.append(e))
        prod.flush(20)
        assert done == [None]
