"""One real Kubernetes control plane for the whole run (``testkube``), with kwok's fake nodes and
the Prometheus Operator and Spark Operator CRDs applied server-side.

Without the built binaries (``make kube-bins``) or etcd (``apt-get install etcd-server``) the
tests here skip, except under ``CI=true``, where they fail.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kubernetes import client
from live_kube import NODES, Kube, established, node, node_ready, wait_until
from real_components import require

from testkube.build import BUILD_TIMEOUT_S, KubeBuildError, building, missing, wait_background
from testkube.cluster import ControlPlaneError, find_etcd, remove_data, start
from testkube.crds import prometheus_operator_crds, spark_application_crd

#: The background build's outcome, waited for once before the first chart test (None: no wait yet).
_build: list[KubeBuildError | None] = []


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """The wait for the control plane's background build is a step of its own, before the first
    chart test starts: pytest-timeout counts fixture setup against the test, so a wait inside
    the fixture turned a build still running into a timeout of every chart test. Bounded by
    ``BUILD_TIMEOUT_S``; a failure is kept and reported by the fixture, in one line."""
    if not _build:
        reporter = item.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None and building():
            bound = f"{BUILD_TIMEOUT_S:.0f} s"
            reporter.write_line(
                f"\nwaiting for the Kubernetes control plane's build (at most {bound})"
            )
        try:
            wait_background(BUILD_TIMEOUT_S)
            _build.append(None)
        except KubeBuildError as exc:
            _build.append(exc)
    yield


@pytest.fixture(scope="session")
def kube(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kube]:
    """The control plane, its nodes Ready and the CRDs Established; stopped at the end."""

    def built() -> None:
        # started at collection when the cache missed (tests/conftest.py), waited for before
        # the first test here (pytest_runtest_protocol above)
        if _build and _build[0] is not None:
            raise ControlPlaneError(str(_build[0]))
        if missing():
            raise ControlPlaneError(f"not built: {missing()} (make kube-bins)")

    require("Kubernetes control plane binaries", built, ControlPlaneError)
    require("etcd", find_etcd, ControlPlaneError)
    plane = start(tmp_path_factory.mktemp("kube"))
    try:
        config = client.Configuration()
        config.host = plane.server
        config.ssl_ca_cert = str(plane.pki.ca)
        config.cert_file = str(plane.pki.admin_cert)
        config.key_file = str(plane.pki.admin_key)
        kube = Kube(plane, client.ApiClient(config))
        for name, spec in NODES.items():
            kube.apply(node(name, spec))
        crds = [*prometheus_operator_crds(), spark_application_crd()]
        for crd in crds:
            kube.apply(crd)
        for name in NODES:
            wait_until(f"kwok node {name} Ready", lambda n=name: node_ready(kube.core.read_node(n)))
        for crd in crds:
            name = crd["metadata"]["name"]
            wait_until(f"CRD {name} Established", lambda n=name: established(kube, n))
        # the service-account controller (kube-controller-manager) is up once `default` has one
        wait_until(
            "ServiceAccount default/default",
            lambda: kube.core.list_namespaced_service_account("default").items,
        )
        kube.rediscover()  # the new kinds
        yield kube
    finally:
        plane.stop()
        remove_data(plane)
