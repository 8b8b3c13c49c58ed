"""kafkautil: one reading of a topic's metadata for the probe and the stream pre-flight."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from core.config import ConfigError
from kafkautil import TopicLayout, current_leaders, describe_topic, layout_of

ASK = dict(bootstrap="k:9092", field="topic", hint="create it")


def metadata(topics: dict[str, Any], brokers: tuple[int, ...] = (1, 2, 3)) -> Any:
    """A ``ClusterMetadata`` look-alike: what confluent-kafka's ``list_topics`` returns."""
    return SimpleNamespace(topics=topics, brokers={b: object() for b in brokers})


def topic(leaders: dict[int, int], error: KafkaError | None = None) -> Any:
    parts = {p: SimpleNamespace(id=p, leader=leader) for p, leader in leaders.items()}
    return SimpleNamespace(partitions=parts, error=error)


class Client:
    """Answers ``list_topics`` with ``answer`` (raised if it is an exception)."""

    def __init__(self, answer: Any) -> None:
        self.answer = answer
        self.asked: list[tuple[str | None, float]] = []

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> Any:
        self.asked.append((topic, timeout))
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


def test_layout_has_every_partition_its_leader_and_all_brokers() -> None:
    md = metadata({"p": topic({1: 2, 0: 1, 2: -1})}, brokers=(1, 2, 3))
    assert layout_of(md, "p", **ASK) == TopicLayout("p", {0: 1, 1: 2, 2: -1}, frozenset({1, 2, 3}))


@pytest.mark.parametrize(
    "found",
    [
        None,
        topic({}),
        topic({0: 1}, KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART)),
    ],
    ids=["absent", "no-partitions", "unknown-topic-error"],
)
def test_an_unknown_topic_names_the_field_and_says_the_hint(found: Any) -> None:
    md = metadata({} if found is None else {"p": found})
    with pytest.raises(ConfigError) as err:
        layout_of(md, "p", bootstrap="k:9092", field="echo_topic", hint="create it (x)")
    assert str(err.value) == "echo_topic: unknown topic 'p' on k:9092; create it (x)"


def test_any_other_topic_error_is_quoted_not_called_unknown() -> None:
    md = metadata({"p": topic({0: 1}, KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED))})
    with pytest.raises(ConfigError) as err:
        layout_of(md, "p", **ASK)
    assert str(err.value) == "topic: 'p' on k:9092: Broker: Topic authorization failed"


def test_describe_asks_once_for_full_metadata_and_names_bootstrap_when_unreachable() -> None:
    client = Client(metadata({"p": topic({0: 3})}))
    assert describe_topic(client, "p", timeout_s=5, **ASK).leaders == {0: 3}
    assert client.asked == [(None, 5)]  # the full list: never auto-creates the topic
    down = Client(KafkaException(KafkaError(KafkaError._TRANSPORT, "Failed to get metadata")))
    with pytest.raises(ConfigError) as err:
        describe_topic(down, "p", timeout_s=1, **ASK)
    assert str(err.value) == "bootstrap: cannot reach k:9092 (Failed to get metadata)"


def test_current_leaders_is_best_effort() -> None:
    client = Client(metadata({"p": topic({0: 2, 1: -1})}))
    assert current_leaders(client, "p", 1.0) == {0: 2, 1: -1}
    assert client.asked == [("p", 1.0)]
    assert current_leaders(Client(RuntimeError("closed")), "p", 1.0) is None
    # the cluster answered without the topic, or with "unknown": it is gone (deleted)
    assert current_leaders(Client(metadata({})), "p", 1.0) == {}
    gone = topic({}, KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART))
    assert current_leaders(Client(metadata({"p": gone})), "p", 1.0) == {}
    failing = topic({0: 1}, KafkaError(KafkaError.LEADER_NOT_AVAILABLE))
    assert current_leaders(Client(metadata({"p": failing})), "p", 1.0) is None
