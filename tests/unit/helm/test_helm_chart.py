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
    # Helm's own parser for -f files (Go YAML: an unquoted `y` or `1e3` is no string there)
    values = helm.values_from_yaml(values_file.read_text()) or {}
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
            rules = promtool_check(groups, tmp_path, required=False)
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


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda p: p.stem)
def test_config_maps_hold_valid_nines_config(scenario: Path) -> None:
    from monitor.config import build
    from probes.config import ProbeConfig
    from streaming.config import StreamConfig

    docs = render(scenario)
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


# -- PrometheusRule from the user's SLA (prometheusRule.groups) ---------------------------------

# Differs from examples/sla.yaml in every objective: quantile, threshold, window, SLO period,
# scope, severity, hiccup guard and staleness delay.
CUSTOM_SLA = """\
windows: [10s, 1m, 1h]
probe_hiccup_max: 20ms
stream_stale_after: 5m
runbook_url: https://runbooks.example.org/kafka-latency
objectives:
  - name: orders-p99
    topic: nines-orders
    quantile: 0.99
    threshold: 10ms
    window: 10s
    objective: 0.99
    slo_period: 7d
    severity: ticket
    summary: Orders p99 above 10ms
  - name: max-1h
    max: 500ms
    window: 1h
  - name: loss
    loss_ratio: 0.01
    window: 10m
  - name: liveness
    no_echoes_for: 5m
"""


NINES = [sys.executable, "-m", "monitor"]


def nines_render(sla: Path, fmt: str, out: Path, *extra: str) -> str:
    """Run the real CLI, `nines alerts render`, and return what it wrote."""
    subprocess.run(
        [*NINES, "alerts", "render", "--sla", str(sla), "--format", fmt, "--out", str(out), *extra],
        check=True,
        cwd=ROOT,
        timeout=60,
    )
    return out.read_text()


def templated_strings(groups: list[dict[str, Any]]) -> list[str]:
    """Every annotation that carries a Prometheus template."""
    return [
        text
        for group in groups
        for rule in group["rules"]
        for text in (rule.get("annotations") or {}).values()
        if "{{" in text
    ]


def promtool_check(groups: list[dict[str, Any]], tmp_path: Path, required: bool = True) -> Path:
    """Write ``groups`` as a rules file and check it with promtool; returns the file.

    Without promtool the test is skipped (``required``) or only the check is left out.
    """
    rules = tmp_path / "rendered-rules.yaml"
    rules.write_text(yaml.safe_dump({"groups": groups}))
    if not shutil.which("promtool"):
        if required:
            pytest.skip("promtool not installed (package 'prometheus'; make system-test-deps)")
        return rules
    out = subprocess.run(["promtool", "check", "rules", str(rules)], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    return rules


def test_prometheus_rule_deploys_the_users_sla(tmp_path: Path) -> None:
    sla = tmp_path / "my-sla.yaml"
    sla.write_text(CUSTOM_SLA)
    values = tmp_path / "sla-values.yaml"
    values_text = nines_render(sla, "helm-values", values, "--label", "release=prometheus")
    expected = yaml.safe_load(nines_render(sla, "rules", tmp_path / "rules.yaml"))["groups"]

    docs = render(values)
    [rule] = [d for d in docs if d["kind"] == "PrometheusRule"]
    assert rule["metadata"]["labels"]["release"] == "prometheus"
    groups = rule["spec"]["groups"]
    assert groups == expected
    bundled = yaml.safe_load((CHART / "files" / "rules.yaml").read_text())["groups"]
    assert groups != bundled
    exprs = [r["expr"] for g in groups for r in g["rules"]]
    assert any('topic="nines-orders"' in e and 'le="0.01"' in e for e in exprs)
    assert any('quantile="0.99"' in e and 'window="10s"' in e for e in exprs)

    # alert templates reach Prometheus verbatim (values are data: toYaml, never tpl)
    templates = templated_strings(expected)
    assert any("{{ $value" in t for t in templates) and any("{{ $labels." in t for t in templates)
    assert sorted(templated_strings(groups)) == sorted(templates)
    assert "{{ $value | humanizeDuration }}" in values_text
    assert "{{ $value | humanizeDuration }}" in yaml.safe_dump(groups, width=10_000)
    promtool_check(groups, tmp_path)


def test_prometheus_rule_without_groups_is_the_bundled_example() -> None:
    docs = render(CHART / "ci" / "monitoring-values.yaml")
    [rule] = [d for d in docs if d["kind"] == "PrometheusRule"]
    bundled = yaml.safe_load((CHART / "files" / "rules.yaml").read_text())
    assert rule["spec"] == bundled


def test_helm_values_keep_number_like_names_strings(tmp_path: Path) -> None:
    # go-yaml (helm -f) reads unquoted 1e3 as a number and y as a bool; label values must be strings
    sla = tmp_path / "sla.yaml"
    sla.write_text(
        yaml.safe_dump(
            {
                "objectives": [
                    {"name": "1e3", "max": "2s"},
                    {"name": "y", "loss_ratio": 0.01, "window": "5m"},
                    {"name": "0x10", "no_echoes_for": "2m"},
                ]
            }
        )
    )
    values = tmp_path / "values.yaml"
    nines_render(sla, "helm-values", values)
    [rule] = [d for d in render(values) if d["kind"] == "PrometheusRule"]
    slos = {
        r["labels"]["slo"]
        for g in rule["spec"]["groups"]
        for r in g["rules"]
        if "slo" in r.get("labels", {})
    }
    assert slos == {"1e3", "y", "0x10"}
    promtool_check(rule["spec"]["groups"], tmp_path)


def test_prometheus_rule_groups_must_be_rule_groups() -> None:
    chart = helm.Chart.load(str(CHART))
    with pytest.raises(helm.HelmError):
        chart.validate_schema({"prometheusRule": {"enabled": True, "groups": [{"name": "x"}]}})
    with pytest.raises(helm.HelmError):
        chart.validate_schema({"prometheusRule": {"groups": "nines-sla"}})


# -- spark-operator mode: checkpoint and archive on a shared ReadWriteMany PVC --------------------


def spark_app(docs: list[dict[str, Any]]) -> dict[str, Any]:
    [app] = [d for d in docs if d["kind"] == "SparkApplication"]
    return app["spec"]


def stream_config(docs: list[dict[str, Any]]) -> dict[str, Any]:
    [cm] = [d for d in docs if d["kind"] == "ConfigMap" and "stream.yaml" in d.get("data", {})]
    config: dict[str, Any] = yaml.safe_load(cm["data"]["stream.yaml"])["stream"]
    return config


def data_claim(spec: dict[str, Any]) -> tuple[str, str]:
    """(claim name, mount path) of the PVC volume mounted on the driver and on the executors."""
    volumes = {v["name"]: v for v in spec["volumes"]}
    found = []
    for role in ("driver", "executor"):
        mounts = [
            m
            for m in spec[role].get("volumeMounts") or []
            if "persistentVolumeClaim" in volumes[m["name"]]
        ]
        assert len(mounts) == 1, (role, spec[role].get("volumeMounts"))
        volume = volumes[mounts[0]["name"]]
        found.append((volume["persistentVolumeClaim"]["claimName"], mounts[0]["mountPath"]))
    assert found[0] == found[1], "driver and executors must share one claim at one path"
    return found[0]


def under(path: str, mount: str) -> bool:
    return (
        Path(path).is_absolute()
        and ".." not in Path(path).parts
        and Path(path).parent == Path(mount)
    )


def test_spark_operator_shares_a_read_write_many_pvc() -> None:
    docs = render(CHART / "ci" / "spark-operator-values.yaml")
    spec = spark_app(docs)
    claim, mount = data_claim(spec)
    assert mount == "/data"
    [pvc] = [d for d in docs if d["kind"] == "PersistentVolumeClaim"]
    assert pvc["metadata"]["name"] == claim
    assert pvc["spec"]["accessModes"] == ["ReadWriteMany"]
    assert pvc["spec"]["storageClassName"] == "nfs-client"
    assert pvc["spec"]["resources"]["requests"]["storage"] == "20Gi"
    kubernetes_validate.validate(pvc, K8S_VERSION, strict=True)
    # the PVC is writable by the non-root UID the job runs as
    for role in ("driver", "executor"):
        assert spec[role]["podSecurityContext"]["fsGroup"] == 10001
    # a read-only root filesystem: Spark's scratch space is a writable emptyDir at /tmp
    volumes = {v["name"]: v for v in spec["volumes"]}
    for role in ("driver", "executor"):
        assert spec[role]["securityContext"]["readOnlyRootFilesystem"] is True
        tmp = [m for m in spec[role]["volumeMounts"] if m["mountPath"] == "/tmp"]
        assert len(tmp) == 1 and "emptyDir" in volumes[tmp[0]["name"]]
    config = stream_config(docs)
    assert config["checkpoint"] == "/data/checkpoint" and under(config["checkpoint"], mount)
    assert config["archive"] == "/data/archive" and under(config["archive"], mount)
    assert config["master"] == ""


def test_spark_operator_uses_an_existing_claim() -> None:
    docs = render(CHART / "ci" / "spark-operator-existing-claim-values.yaml")
    claim, mount = data_claim(spark_app(docs))
    assert (claim, mount) == ("nines-shared-data", "/data")
    assert not [d for d in docs if d["kind"] == "PersistentVolumeClaim"]
    config = stream_config(docs)
    assert under(config["checkpoint"], mount) and under(config["archive"], mount)


def test_local_mode_keeps_its_read_write_once_pvc() -> None:
    docs = render(CHART / "ci" / "default-values.yaml")
    [pvc] = [d for d in docs if d["kind"] == "PersistentVolumeClaim"]
    assert pvc["metadata"]["name"] == "nines-stream"
    assert pvc["spec"]["accessModes"] == ["ReadWriteOnce"]
    config = stream_config(docs)
    assert (config["checkpoint"], config["archive"]) == ("/data/checkpoint", "/data/archive")


def test_spark_operator_checkpoint_must_be_local(tmp_path: Path) -> None:
    chart = helm.Chart.load(str(CHART))
    so = {"stream": {"mode": "spark-operator", "bootstrap": "kafka:9092"}}
    with pytest.raises(helm.HelmError, match="checkpoint"):
        chart.validate_schema(
            {"stream": {**so["stream"], "sparkOperator": {"checkpoint": "s3a://b/c"}}}
        )
    # the old default still validates and means the same place
    old = tmp_path / "old.yaml"
    old.write_text(
        yaml.safe_dump(
            {"stream": {**so["stream"], "sparkOperator": {"checkpoint": "/data/checkpoint"}}}
        )
    )
    assert stream_config(render(old))["checkpoint"] == "/data/checkpoint"
