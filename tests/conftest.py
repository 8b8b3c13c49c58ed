"""Shared fixtures: a ``nines broker`` cluster (or ``NINES_BOOTSTRAP``) and Kafka client helpers.

``broker`` is one cluster for the whole session (topics from :func:`unique_topic` keep tests
apart); ``fresh_broker`` is a cluster of its own for tests that inject faults. Set
``NINES_BOOTSTRAP=host:9092`` to run against a real Kafka instead (fault tests skip then).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kafka_cluster import (
    Cluster,
    ExternalCluster,
    cluster_from_env,
    consumer,
    producer,
    unique_topic,
    wait_for,
)
from real_components import pytest_runtest_makereport

from testbroker import EmbeddedBroker

#: The CI hook (a skip fails under CI=true) is registered by being a name of this conftest.
__all__ = ["consumer", "producer", "pytest_runtest_makereport", "unique_topic", "wait_for"]


@pytest.fixture(scope="session")
def broker() -> Iterator[EmbeddedBroker | ExternalCluster]:
    """The session's cluster: ``nines broker`` with defaults, or the one in NINES_BOOTSTRAP."""
    external = cluster_from_env()
    if external is not None:
        yield external
        return
    with EmbeddedBroker() as embedded:
        yield embedded


@pytest.fixture
def fresh_broker() -> Iterator[EmbeddedBroker]:
    """A private ``nines broker`` (3 brokers, default topics) that a test may break at will."""
    with EmbeddedBroker() as embedded:
        yield embedded


@pytest.fixture
def topic(broker: Cluster) -> str:
    """A fresh single-partition topic on the session cluster."""
    return unique_topic(broker, 1)
