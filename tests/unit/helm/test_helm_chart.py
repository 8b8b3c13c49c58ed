"""The Helm chart renders offline for every scenario, validates, and stays in sync with the code."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import helm_python as helm
import kubernetes_validate
import pytest
import yaml

ROOT = Path(__file__).parents[3]
CHART = ROOT / "helm" / "nines"
SCENARIOS = sorted((CHART / "ci").glob("*.yaml"))
K8S_VERSION = "1.30"


def render(values_file: Path) -> list[dict[str, Any]]:
    values = yaml.safe_load(values_file.read_text()) or {}
    chart = helm.Chart.load(str(CHART))
    chart.validate_schema(values)
    out = chart.render(values, name="nines", namespace="monitoring")
    docs = []
    for name, text in out.items():
        if name.endswith("NOTES.txt"):
            continue
        docs.extend(d for d in yaml.safe_load_all(text) if d)
    return docs


def test_lint_has_no_errors() -> None:
    result = helm.lint(str(CHART))
    assert result["errors"] == [], result


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda p: p.stem)
def test_scenario_renders_and_validates(scenario: Path, tmp_path: Path) -> None:
    docs = render(scenario)
    kinds = {d["kind"] for d in docs}
    assert {"Service", "ConfigMap"} <= kinds
    for d in docs:
        labels = d["metadata"]["labels"]
        assert labels["app.kubernetes.io/name"] == "nines"
        if d["apiVersion"].startswith(("monitoring.coreos.com", "sparkoperator.k8s.io")):
            continue
        kubernetes_validate.validate(d, K8S_VERSION, strict=True)
    for d in docs:
        if d["kind"] == "Deployment":
            pod = d["spec"]["template"]["spec"]
            assert pod["securityContext"]["runAsNonRoot"] is True
            for c in pod["containers"]:
                sc = c["securityContext"]
                assert sc["allowPrivilegeEscalation"] is False
                assert sc["capabilities"]["drop"] == ["ALL"]
            # secrets are referenced, never inlined
            for c in pod["containers"]:
                for env in c.get("env") or []:
                    assert "value" not in env or "PASSWORD" not in env["name"]
        if d["kind"] == "SparkApplication":
            spec = d["spec"]
            for field in (
                "type",
                "mode",
                "image",
                "mainApplicationFile",
                "sparkVersion",
                "driver",
                "executor",
            ):
                assert spec.get(field), field
            assert spec["executor"]["instances"] >= 1
        if d["kind"] == "ServiceMonitor":
            assert d["spec"]["endpoints"][0]["port"] == "metrics"
        if d["kind"] == "PrometheusRule":
            groups = d["spec"]["groups"]
            assert groups
            rules = tmp_path / "rules.yaml"
            rules.write_text(yaml.safe_dump({"groups": groups}))
            if shutil.which("promtool"):
                out = subprocess.run(
                    ["promtool", "check", "rules", str(rules)], capture_output=True, text=True
                )
                assert out.returncode == 0, out.stdout + out.stderr
            # alert templates survive Helm untouched
            assert "{{ $value" in rules.read_text()
        if d["kind"] == "ConfigMap" and any(k.endswith(".json") for k in d.get("data", {})):
            assert d["metadata"]["labels"]["grafana_dashboard"] == "1"
            for text in d["data"].values():
                assert json.loads(text)["uid"].startswith("nines-")


def test_sasl_secrets_come_from_secret_refs() -> None:
    docs = render(CHART / "ci" / "sasl-values.yaml")
    probes = [
        d
        for d in docs
        if d["kind"] == "Deployment"
        and d["metadata"]["labels"].get("app.kubernetes.io/component") == "probe"
    ]
    assert len(probes) == 2
    env = probes[0]["spec"]["template"]["spec"]["containers"][0]["env"]
    assert env[0]["valueFrom"]["secretKeyRef"] == {"name": "kafka-probe", "key": "password"}
    cm = next(d for d in docs if d["kind"] == "ConfigMap" and "probe.yaml" in d.get("data", {}))
    probe_cfg = yaml.safe_load(cm["data"]["probe.yaml"])["probe"]
    assert probe_cfg["kafka"]["sasl.password"] == "env:SASL_PASSWORD"


def test_config_maps_hold_valid_nines_config() -> None:
    from monitor.config import build
    from probes.config import ProbeConfig
    from streaming.config import StreamConfig

    docs = render(CHART / "ci" / "default-values.yaml")
    for d in docs:
        for key, text in (d.get("data") or {}).items():
            if key == "probe.yaml":
                build(ProbeConfig, yaml.safe_load(text)["probe"])
            if key == "stream.yaml":
                build(StreamConfig, yaml.safe_load(text)["stream"])


def test_bad_values_are_rejected_by_the_schema() -> None:
    chart = helm.Chart.load(str(CHART))
    with pytest.raises(helm.HelmError):
        chart.validate_schema({"probes": [{"cluster": "x", "bootstrap": "k:9", "rate": -1}]})


def test_generated_files_are_fresh(tmp_path: Path) -> None:
    rules = tmp_path / "rules.yaml"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "monitor",
            "alerts",
            "render",
            "--sla",
            str(ROOT / "examples" / "sla.yaml"),
            "--format",
            "rules",
            "--out",
            str(rules),
        ],
        check=True,
    )
    assert rules.read_text() == (CHART / "files" / "rules.yaml").read_text(), (
        "helm/nines/files/rules.yaml is stale: run `make dashboards`"
    )
    for src in (ROOT / "dashboards" / "json").glob("*.json"):
        assert src.read_text() == (CHART / "files" / "dashboards" / src.name).read_text(), (
            f"helm/nines/files/dashboards/{src.name} is stale: run `make dashboards`"
        )
