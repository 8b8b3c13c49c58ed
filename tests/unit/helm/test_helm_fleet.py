"""The chart's probe fleet: ``probes[].replicas`` above 1 runs the probe as a fleet (its
``fleet_group`` the cluster's name) with a PodDisruptionBudget that keeps all but one and a
spread across nodes; at 1, the single probe as before (docs/deploy.md, "A probe fleet")."""

from __future__ import annotations

from typing import Any

import helm_python as helm
import pytest
import yaml
from helm_render import CHART, render, values_of

from core.config import build
from probes.config import ProbeConfig

FLEET = CHART / "ci" / "fleet-values.yaml"


def of(docs: list[dict[str, Any]], kind: str, cluster: str) -> list[dict[str, Any]]:
    return [
        d
        for d in docs
        if d["kind"] == kind
        and (
            d["metadata"].get("labels", {}).get("nines/cluster") == cluster
            or d["metadata"]["name"].endswith(f"-probe-{cluster}")
        )
    ]


def test_a_fleet_gets_replicas_a_budget_a_spread_and_its_group() -> None:
    docs = render(values_of(FLEET))
    (deploy,) = of(docs, "Deployment", "prod")
    spec, pod = deploy["spec"], deploy["spec"]["template"]["spec"]
    assert spec["replicas"] == 3 and spec["strategy"]["rollingUpdate"]["maxUnavailable"] == 1
    (spread,) = pod["topologySpreadConstraints"]
    assert spread["topologyKey"] == "kubernetes.io/hostname" and spread["maxSkew"] == 1
    pods = spec["template"]["metadata"]["labels"]
    assert spread["labelSelector"]["matchLabels"] == spec["selector"]["matchLabels"]
    (pdb,) = of(docs, "PodDisruptionBudget", "prod")
    assert pdb["spec"]["maxUnavailable"] == 1
    assert pdb["spec"]["selector"]["matchLabels"].items() <= pods.items()
    (cm,) = of(docs, "ConfigMap", "prod")
    probe = build(ProbeConfig, yaml.safe_load(cm["data"]["probe.yaml"])["probe"])
    assert probe.fleet_group == "prod" and "fleet" in probe.clients()


def test_one_replica_is_the_single_probe_as_before() -> None:
    docs = render(values_of(FLEET))
    (deploy,) = of(docs, "Deployment", "staging")
    assert deploy["spec"]["replicas"] == 1 and deploy["spec"]["strategy"] == {"type": "Recreate"}
    assert "topologySpreadConstraints" not in deploy["spec"]["template"]["spec"]
    assert of(docs, "PodDisruptionBudget", "staging") == []
    (cm,) = of(docs, "ConfigMap", "staging")
    assert "fleet_group" not in yaml.safe_load(cm["data"]["probe.yaml"])["probe"]


@pytest.mark.parametrize("bootstrap", ["nats://nats:4222", "redis://redis:6379"])
def test_a_fleet_of_a_system_without_consumer_groups_is_refused(bootstrap: str) -> None:
    values = {"probes": [{"cluster": "q", "bootstrap": bootstrap, "replicas": 2}]}
    values["probes"][0]["echoBootstrap"] = "kafka:9092"
    with pytest.raises(helm.HelmError, match=r"probes\[0\]\.replicas: a probe fleet"):
        render(values)


def test_replicas_below_one_are_refused_by_the_schema() -> None:
    with pytest.raises(helm.HelmError):
        render({"probes": [{"cluster": "x", "bootstrap": "k:9092", "replicas": 0}]})
