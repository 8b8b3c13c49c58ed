"""Gentle topic administration: create a topic, add partitions where we say, survey the cluster.

Only what ``--manage-topic`` needs, and nothing that moves data: no reassignment of an existing
replica, ever; a preferred-leader election only through :meth:`TopicAdmin.elect_preferred`,
which the probe calls only under ``--rebalance``. Calls return futures, so a caller can keep
at most one in flight without blocking; a refused call is named by :func:`refusal`.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Survey:
    """One full metadata answer about a topic: what management decides from."""

    topic: str
    #: Every broker of the cluster.
    brokers: frozenset[int]
    #: Partition → leader (-1 while it has none); empty when the topic does not exist.
    leaders: dict[int, int]
    #: Partition → its replicas, preferred leader first.
    replicas: dict[int, list[int]]

    @property
    def exists(self) -> bool:
        """The topic has partitions."""
        return bool(self.leaders)

    @property
    def unprobed(self) -> frozenset[int]:
        """Brokers that lead no partition of the topic."""
        return self.brokers - frozenset(self.leaders.values())


def survey(client: Any, topic: str, timeout_s: float, *, known: bool = False) -> Survey | None:
    """The topic and the cluster's brokers now; None when the cluster does not answer.

    A full metadata request (no topic named), so asking never auto-creates the topic, unless
    the topic is ``known`` to exist: then only it is asked for (a large cluster's full metadata
    is megabytes). A topic the cluster reports with an error (absent, not authorised) surveys
    as absent.
    """
    try:
        if known:
            metadata = client.list_topics(topic, timeout=timeout_s)
        else:
            metadata = client.list_topics(timeout=timeout_s)
    except Exception:
        return None
    found = metadata.topics.get(topic)
    parts = {} if found is None or found.error is not None else found.partitions
    return Survey(
        topic,
        frozenset(metadata.brokers),
        {p: pm.leader for p, pm in parts.items()},
        {p: list(pm.replicas) for p, pm in parts.items()},
    )


def refusal(exc: BaseException) -> str:
    """The name of the error a refused admin call ended with (e.g. ``TOPIC_AUTHORIZATION_FAILED``).

    confluent-kafka raises KafkaException carrying a KafkaError; anything else is named by type.
    """
    error = exc.args[0] if exc.args else None
    name = getattr(error, "name", None)
    if callable(name):
        return str(name())
    return type(exc).__name__


class TopicAdmin:
    """A confluent-kafka AdminClient on one cluster, limited to the gentle calls above."""

    def __init__(self, settings: dict[str, Any], timeout_s: float, survey_timeout_s: float) -> None:
        from confluent_kafka.admin import AdminClient

        #: An admin call's own timeout; a survey's, which its caller waits for, is shorter.
        self.timeout_s, self.survey_timeout_s = timeout_s, survey_timeout_s
        self._admin: Any = AdminClient(settings)

    def poll(self) -> None:
        """Serve the client's queued events without waiting.

        With a ``logger`` setting librdkafka queues its log lines for ``poll()`` instead of
        printing them; unserved, the queue grows for as long as the cluster is unreachable.
        """
        self._admin.poll(0)

    def survey(self, topic: str, *, known: bool = False) -> Survey | None:
        """See :func:`survey`."""
        return survey(self._admin, topic, self.survey_timeout_s, known=known)

    def create_topic(self, topic: str, partitions: int, replication_factor: int) -> Future[Any]:
        """CreateTopics for one topic; the future fails with the cluster's refusal."""
        from confluent_kafka.admin import NewTopic

        futures = self._admin.create_topics(
            [NewTopic(topic, partitions, replication_factor)],
            operation_timeout=self.timeout_s,
            request_timeout=self.timeout_s,
        )
        return futures[topic]  # type: ignore[no-any-return]

    def create_partitions(
        self, topic: str, existing: int, placement: Sequence[Sequence[int]]
    ) -> Future[Any]:
        """Add one partition per entry of ``placement`` (its replicas, the leader first) to a
        topic of ``existing`` partitions.

        New partitions only: the replicas of the existing ones stay where they are.
        """
        from confluent_kafka.admin import NewPartitions

        total = existing + len(placement)
        futures = self._admin.create_partitions(
            [NewPartitions(topic, total, [list(r) for r in placement])],
            operation_timeout=self.timeout_s,
            request_timeout=self.timeout_s,
        )
        return futures[topic]  # type: ignore[no-any-return]

    def elect_preferred(self, topic: str, partitions: Sequence[int]) -> Future[Any]:
        """A preferred-leader election of ``partitions`` (only ever asked for under --rebalance)."""
        from confluent_kafka import ElectionType, TopicPartition

        # No timeouts passed: confluent-kafka 2.16's binding rejects them (SystemError), so the
        # client's socket.timeout.ms (60 s) bounds the call.
        return self._admin.elect_leaders(  # type: ignore[no-any-return]
            ElectionType.PREFERRED, [TopicPartition(topic, p) for p in partitions]
        )
