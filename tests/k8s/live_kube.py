"""The live cluster as the install tests use it: the ``kubernetes`` client (typed and dynamic),
server-side apply, Helm's connection, kwok's nodes, and a poll that fails naming what it waited
for. Only helm-python-sdk and the ``kubernetes`` client talk to the API server; no kubectl."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import helm_python as helm
import pytest
from kubernetes import client
from kubernetes.dynamic import DynamicClient

from testkube.cluster import KWOK_NODE_ANNOTATION, ControlPlane

FIELD_MANAGER = "nines-tests"
#: kwok's nodes: one for any pod, one tainted and labelled as the dedicated pool of the
#: sasl-spark-operator scenario (nodeSelector nines/pool, a toleration, an arch affinity).
NODES: dict[str, dict[str, Any]] = {
    "kwok-general": {"labels": {}, "taints": []},
    "kwok-monitoring": {
        "labels": {"nines/pool": "monitoring"},
        "taints": [{"key": "dedicated", "value": "monitoring", "effect": "NoSchedule"}],
    },
}
WAIT_S = 90.0


def wait_until(what: str, check: Callable[[], object], timeout_s: float = WAIT_S) -> Any:
    """``check()``'s first truthy answer, polled every 0.2 s; fail naming ``what`` after."""
    deadline = time.monotonic() + timeout_s
    last: object = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(0.2)
    pytest.fail(f"{what} not within {timeout_s:.0f} s (last: {last!r})")


@dataclass
class Kube:
    """The live cluster as the tests use it: the typed and dynamic clients and Helm's config."""

    plane: ControlPlane
    api: client.ApiClient

    @property
    def core(self) -> client.CoreV1Api:
        return client.CoreV1Api(self.api)

    @property
    def apps(self) -> client.AppsV1Api:
        return client.AppsV1Api(self.api)

    @cached_property
    def dynamic(self) -> DynamicClient:
        """One discovery for the run (made again by ``rediscover`` once CRDs are added)."""
        return DynamicClient(self.api)

    def rediscover(self) -> None:
        self.__dict__.pop("dynamic", None)

    def apply(self, obj: dict[str, Any], namespace: str | None = None) -> Any:
        """Server-side apply, as ``helm install`` and ``kubectl apply --server-side`` do."""
        resource = self.dynamic.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
        return resource.server_side_apply(
            body=obj, namespace=namespace, field_manager=FIELD_MANAGER, force_conflicts=True
        )

    def get(self, api_version: str, kind: str, name: str, namespace: str) -> Any:
        resource = self.dynamic.resources.get(api_version=api_version, kind=kind)
        return resource.get(name=name, namespace=namespace)

    def helm(self, namespace: str) -> helm.Config:
        """Helm's connection, through the same kubeconfig (admin client certificate)."""
        return helm.Config(kubeconfig_path=str(self.plane.kubeconfig), namespace=namespace)


def node(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {KWOK_NODE_ANNOTATION: "fake"},
            "labels": {
                "kubernetes.io/arch": "amd64",
                "kubernetes.io/os": "linux",
                "kubernetes.io/hostname": name,
                "type": "kwok",
                **spec["labels"],
            },
        },
        "spec": {"taints": spec["taints"]},
        "status": {
            "allocatable": {"cpu": "32", "memory": "256Gi", "pods": "110"},
            "capacity": {"cpu": "32", "memory": "256Gi", "pods": "110"},
        },
    }


def node_ready(node: Any) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in node.status.conditions or [])


def established(kube: Kube, name: str) -> bool:
    crd = kube.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", name, None)
    conditions = (crd.status or {}).get("conditions") or []
    return any(c["type"] == "Established" and c["status"] == "True" for c in conditions)
