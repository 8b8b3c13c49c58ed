"""Shared fixtures: a ``nines broker`` cluster (or ``NINES_BOOTSTRAP``) and Kafka client helpers.

``broker`` is one cluster for the whole session (topics from :func:`unique_topic` keep tests
apart); ``fresh_broker`` is a cluster of its own for tests that inject faults. Set
``NINES_BOOTSTRAP=host:9092`` to run against a real Kafka instead (fault tests skip then).

``tansu_broker`` / ``fresh_tansu_broker`` are the same on Tansu, a real Kafka-compatible
broker (``nines broker --engine tansu``); ``any_broker`` runs a test on the mock and on Tansu.
Without a Tansu binary those tests skip, except under ``CI=true``, where they fail.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

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
from testbroker.tansu import TansuError, find_binary

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


def require_tansu() -> None:
    """Skip without a Tansu binary, but fail under CI: CI must never skip the real broker."""
    try:
        find_binary()
    except TansuError as exc:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"CI=true and no Tansu: {exc}")
        pytest.skip(str(exc))


@pytest.fixture
def tansu_binary() -> Path:
    """The Tansu binary ``nines broker --engine tansu`` would run (skip/fail as above)."""
    require_tansu()
    return find_binary()


@pytest.fixture(scope="session")
def tansu_broker() -> Iterator[EmbeddedBroker]:
    """One Tansu broker for the session (default topics, 1 partition each for the probe)."""
    require_tansu()
    with EmbeddedBroker(engine="tansu") as embedded:
        yield embedded


@pytest.fixture
def fresh_tansu_broker() -> Iterator[EmbeddedBroker]:
    """A private Tansu broker a test may stall at will (3 probe partitions, as the mock's)."""
    require_tansu()
    topics = [("nines.probe", 3), ("nines.echoes", 2)]
    with EmbeddedBroker(engine="tansu", topics=topics) as embedded:
        yield embedded


@pytest.fixture(params=["mock", "tansu"])
def any_broker(request: pytest.FixtureRequest) -> Cluster:
    """The session cluster on each engine: the test runs once on the mock, once on Tansu."""
    name = "broker" if request.param == "mock" else "tansu_broker"
    cluster: Cluster = request.getfixturevalue(name)
    return cluster


@pytest.fixture(params=["mock", "tansu"])
def any_fresh_broker(request: pytest.FixtureRequest) -> EmbeddedBroker:
    """A private cluster on each engine, for tests that stall the whole broker."""
    name = "fresh_broker" if request.param == "mock" else "fresh_tansu_broker"
    cluster: EmbeddedBroker = request.getfixturevalue(name)
    return cluster
