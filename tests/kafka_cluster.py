"""Helpers for tests, the demo and benchmarks: Kafka clients and topics on any nines cluster.

A cluster is either an :class:`~testbroker.EmbeddedBroker` (faults available) or an
:class:`ExternalCluster` named by ``NINES_BOOTSTRAP`` (real Kafka; faults raise).
"""

from __future__ import annotations

import itertools
import os
import time
import uuid
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from confluent_kafka import Consumer, Producer

BOOTSTRAP_ENV = "NINES_BOOTSTRAP"


class FaultInjectionUnavailable(RuntimeError):
    """Faults need the embedded cluster; an external cluster cannot be slowed or stopped."""


class Cluster(Protocol):
    """What tests need from a cluster: where it is and how to add a topic."""

    @property
    def bootstrap(self) -> str: ...

    def create_topic(self, name: str, partitions: int) -> None: ...


class ExternalCluster:
    """A handle on a cluster started elsewhere (e.g. real Kafka); no fault injection."""

    faults = False

    def __init__(self, bootstrap: str, replication_factor: int = 1) -> None:
        self.bootstrap = bootstrap
        self.replication_factor = replication_factor

    def create_topic(self, name: str, partitions: int, timeout_s: float = 30.0) -> None:
        """Create a topic with the Kafka admin API and wait until it exists."""
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        futures = admin.create_topics(
            [NewTopic(name, partitions, self.replication_factor)], operation_timeout=timeout_s
        )
        futures[name].result(timeout=timeout_s)

    def _no_faults(self, *args: object) -> None:
        raise FaultInjectionUnavailable(f"external cluster {self.bootstrap}: no fault injection")

    ctl = rtt = down = up = set_leader = pause = resume = _no_faults


def cluster_from_env() -> ExternalCluster | None:
    """The external cluster named by ``NINES_BOOTSTRAP``, or None to start an embedded one."""
    bootstrap = os.environ.get(BOOTSTRAP_ENV, "").strip()
    return ExternalCluster(bootstrap) if bootstrap else None


def _kafka_conf(bootstrap: str, defaults: dict[str, Any], conf: dict[str, Any]) -> dict[str, Any]:
    """Merge: ``linger_ms=5`` is accepted for ``linger.ms`` (Kafka keys never hold ``_``)."""
    merged = {"bootstrap.servers": bootstrap, **defaults}
    merged.update({k.replace("_", "."): v for k, v in conf.items()})
    return merged


def producer(bootstrap: str, **conf: Any) -> Producer:
    """A confluent-kafka Producer on ``bootstrap``; keyword args are Kafka config keys."""
    from confluent_kafka import Producer

    return Producer(_kafka_conf(bootstrap, {"linger.ms": 5}, conf))


def consumer(bootstrap: str, **conf: Any) -> Consumer:
    """A confluent-kafka Consumer reading from the earliest offset in a fresh group."""
    from confluent_kafka import Consumer

    defaults = {
        "group.id": f"nines-test-{uuid.uuid4().hex[:8]}",
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    }
    return Consumer(_kafka_conf(bootstrap, defaults, conf))


_SEQ = itertools.count()


def unique_topic(
    cluster: Cluster, partitions: int = 1, prefix: str = "t", replication: int | None = None
) -> str:
    """Create a topic whose name no other test uses; return its name. A ``replication``
    factor needs a cluster that takes one (Apache Kafka's ``EmbeddedBroker``)."""
    name = f"{prefix}.{os.getpid()}.{next(_SEQ)}.{uuid.uuid4().hex[:6]}"
    if replication is None:
        cluster.create_topic(name, partitions)
    else:
        cluster.create_topic(name, partitions, replication)  # type: ignore[call-arg]
    return name


def wait_for(predicate: Any, timeout_s: float, interval_s: float = 0.05) -> Any:
    """Poll until ``predicate()`` is truthy; return it or raise TimeoutError."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"condition not met within {timeout_s} s")
        time.sleep(interval_s)


__all__ = [
    "BOOTSTRAP_ENV",
    "Cluster",
    "ExternalCluster",
    "FaultInjectionUnavailable",
    "cluster_from_env",
    "consumer",
    "producer",
    "unique_topic",
    "wait_for",
]
