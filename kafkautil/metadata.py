"""Topic metadata: does the topic exist, its partitions, their leaders and the cluster's brokers.

The probe (its probe topic) and the stream job's pre-flight (its echo topic) ask the same
question before they start; this is the one answer. It imports only ``core`` and
confluent-kafka, so every stage may use it without importing another stage.
"""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass
from typing import Any

from core.config import ConfigError
from kafkautil.acls import lacks


@dataclass(frozen=True, slots=True)
class TopicLayout:
    """A topic as one metadata response shows it."""

    topic: str
    #: Partition → id of the broker that leads it (-1 while it has none).
    leaders: dict[int, int]
    #: Every broker of the cluster, leading a partition of this topic or not.
    brokers: frozenset[int]


def layout_of(metadata: Any, topic: str, *, bootstrap: str, field: str, hint: str) -> TopicLayout:
    """The topic's layout from a ``ClusterMetadata``, or ConfigError naming ``field``.

    An unknown topic (absent, UNKNOWN_TOPIC_OR_PART, or without partitions) says ``hint``;
    any other topic error (e.g. not authorised) is quoted as the broker gave it.
    """
    from confluent_kafka import KafkaError

    found = metadata.topics.get(topic)
    error = found.error if found is not None else None
    if error is not None and error.code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
        raise ConfigError(f"{field}: {topic!r} on {bootstrap}: {error.str()}")
    if found is None or error is not None or not found.partitions:
        raise ConfigError(f"{field}: unknown topic {topic!r} on {bootstrap}; {hint}")
    return TopicLayout(
        topic,
        {p: pm.leader for p, pm in found.partitions.items()},
        frozenset(metadata.brokers),
    )


#: librdkafka's line prefix (``sasl_ssl://host:port/bootstrap: ``) and suffix (``(after …)``).
_BROKER_PREFIX = re.compile(r"^\S+://\S+?: ")
_AFTER = re.compile(r"\s*\(after \d+ms in state \w+\)$")


class NoAnswer(ConfigError):
    """The cluster accepted the connection and said nothing, not even an error, in time: a
    broker that is hung, or not ready yet, rather than a wrong address (that is refused)."""


class ConnectFailures:
    """A client's ``error_cb`` that keeps why it could not talk to the cluster at all: the
    broker refused its credentials, or its TLS handshake failed. librdkafka only says
    "transport failure" to the request that timed out; this names the cause.

    ``heard`` tells a silent cluster (connections accepted, no answer, no error) from one that
    refused or dropped them: librdkafka reports either as the same timed-out request."""

    def __init__(self) -> None:
        self.reason: str | None = None
        self.heard = False

    def __call__(self, err: Any) -> None:
        from confluent_kafka import KafkaError

        self.heard = True
        codes = (KafkaError._AUTHENTICATION, KafkaError._SSL, KafkaError.SASL_AUTHENTICATION_FAILED)
        if self.reason is None and err.code() in codes:
            self.reason = _AFTER.sub("", _BROKER_PREFIX.sub("", err.str()))


def describe_topic(
    client: Any,
    topic: str,
    *,
    bootstrap: str,
    field: str,
    hint: str,
    timeout_s: float,
    failures: ConnectFailures | None = None,
    by_name: str | None = None,
) -> TopicLayout:
    """Ask ``client`` (any confluent-kafka Producer, Consumer or AdminClient) for ``topic``.

    One full metadata request, so nothing is auto-created. ConfigError names ``bootstrap`` when
    the cluster does not answer within ``timeout_s`` (with the authentication or TLS failure that
    ``failures``, the client's ``error_cb``, heard; :class:`NoAnswer` when it heard nothing at
    all), else ``field`` (see :func:`layout_of`).

    A full answer leaves out the topics the principal may not Describe, so a topic missing
    from it is asked for by name too when ``by_name`` names the right that includes Describe
    (e.g. ``READ``): a refusal then says that right is missing, not that the topic is. Only for
    a client that never auto-creates topics (a consumer's default).
    """
    from confluent_kafka import KafkaException

    try:
        metadata = client.list_topics(timeout=timeout_s)
    except KafkaException as exc:
        if failures is not None:
            client.poll(0)  # serves the error callbacks queued meanwhile
            if failures.reason is not None:
                raise ConfigError(f"bootstrap: {bootstrap}: {failures.reason}") from None
            if not failures.heard:
                raise NoAnswer(
                    f"bootstrap: {bootstrap} accepted the connection but sent no metadata in "
                    f"{timeout_s:g} s"
                ) from None
        raise ConfigError(f"bootstrap: cannot reach {bootstrap} ({exc.args[0].str()})") from None
    if by_name is not None and topic not in metadata.topics:
        with contextlib.suppress(KafkaException):
            found = client.list_topics(topic, timeout=timeout_s).topics.get(topic)
            error = found.error if found is not None else None
            if error is not None and error.name().endswith("_AUTHORIZATION_FAILED"):
                why = lacks(error.name(), by_name, "TOPIC", topic)
                raise ConfigError(f"{field}: {topic!r} on {bootstrap}: {why}")
    return layout_of(metadata, topic, bootstrap=bootstrap, field=field, hint=hint)


def current_leaders(client: Any, topic: str, timeout_s: float) -> dict[int, int] | None:
    """Partition → leader as the cluster says now: empty when it says the topic does not exist
    (deleted); None when it does not answer, or answers with another error (try later)."""
    from confluent_kafka import KafkaError

    try:
        metadata = client.list_topics(topic, timeout=timeout_s)
    except Exception:
        return None
    found = metadata.topics.get(topic)
    if found is None:
        return {}
    if found.error is not None:
        return {} if found.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART else None
    return {p: pm.leader for p, pm in found.partitions.items()}
