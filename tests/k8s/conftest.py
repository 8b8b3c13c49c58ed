"""One real Kubernetes control plane for the whole run (``testkube``), with kwok's fake nodes and
the Prometheus Operator and Spark Operator CRDs applied server-side.

Without the built binaries (``make kube-bins``) or etcd (``apt-get install etcd-server``) the
tests here skip, except under ``CI=true``, where they fail.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from background_builds import built
from kubernetes import client
from live_kube import NODES, Kube, established, node, node_ready, wait_until
from real_components import require

from testkit.gobuild import GoBuildError
from testkube.build import KUBE
from testkube.cluster import ControlPlaneError, find_etcd, remove_data, start
from testkube.crds import prometheus_operator_crds, spark_application_crd


@pytest.fixture(scope="session")
def kube(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kube]:
    """The control plane, its nodes Ready and the CRDs Established; stopped at the end."""

    def binaries() -> None:
        # started at collection when the cache missed, waited for before the first test
        # here (tests/background_builds.py)
        try:
            built(KUBE)
        except GoBuildError as exc:
            raise ControlPlaneError(f"{exc} (make kube-bins)") from None

    require("Kubernetes control plane binaries", binaries, ControlPlaneError)
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
