"""The shared fixtures others build on: session cluster, unique topics, NINES_BOOTSTRAP handle."""

from __future__ import annotations

import pytest
from confluent_kafka import TopicPartition
from kafka_cluster import (
    Cluster,
    ExternalCluster,
    FaultInjectionUnavailable,
    cluster_from_env,
    consumer,
    producer,
    unique_topic,
    wait_for,
)

from testbroker import EmbeddedBroker


def test_unique_topics_on_the_session_cluster_are_separate(broker: Cluster, topic: str) -> None:
    other = unique_topic(broker, 4)
    assert other != topic
    md = producer(broker.bootstrap).list_topics(timeout=10)
    assert len(md.topics[topic].partitions) == 1
    assert len(md.topics[other].partitions) == 4

    prod = producer(broker.bootstrap, linger_ms=0)
    prod.produce(topic, value=b"only-here")
    assert prod.flush(10) == 0
    cons = consumer(broker.bootstrap)
    cons.assign([TopicPartition(topic, 0, 0)])
    msgs = wait_for(lambda: [m for m in cons.consume(10, 0.5) if m.error() is None], 10)
    cons.close()
    assert [m.value() for m in msgs] == [b"only-here"]


def test_session_cluster_is_embedded_unless_bootstrap_is_given(broker: Cluster) -> None:
    if cluster_from_env() is None:
        assert isinstance(broker, EmbeddedBroker) and broker.running
    else:
        assert isinstance(broker, ExternalCluster)


def test_external_cluster_from_env_refuses_faults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NINES_BOOTSTRAP", " kafka-1:9092,kafka-2:9092 ")
    ext = cluster_from_env()
    assert isinstance(ext, ExternalCluster) and ext.bootstrap == "kafka-1:9092,kafka-2:9092"
    assert ext.faults is False
    for fault in (ext.pause, lambda: ext.rtt(1, 5), lambda: ext.down(1)):
        with pytest.raises(FaultInjectionUnavailable, match="kafka-1:9092"):
            fault()
    monkeypatch.setenv("NINES_BOOTSTRAP", "")
    assert cluster_from_env() is None


def test_client_helpers_map_underscores_to_kafka_keys(broker: Cluster) -> None:
    with pytest.raises(Exception, match=r"not\.a\.key"):  # reached librdkafka as not.a.key
        producer(broker.bootstrap, not_a_key=1)
    cons = consumer(broker.bootstrap, auto_offset_reset="latest", **{"client.id": "helper"})
    cons.close()
