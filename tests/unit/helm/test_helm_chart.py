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
from real_components import in_ci, require_tool

from core.kafka_conf import reveal

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
    docs: list[dict[str, Any]] = []
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
def test_config_maps_hold_valid_nines_config(
    scenario: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from core.config import build
    from monitor.pipeline import PipelineConfig as StreamConfig  # the `stream:` section
    from probes.config import ProbeConfig

    values = values_of(scenario)
    # what the pods' secretEnv would set (a URL where the config reads a bootstrap from it)
    for where in [*(values.get("probes") or []), values.get("stream") or {}]:
        for e in where.get("secretEnv") or []:
            url = e["name"].endswith("_URL")
            monkeypatch.setenv(e["name"], "nats://t0ken@nats.example:4222" if url else "s3cret")
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
        if required or in_ci():
            require_tool("promtool", "Debian package 'prometheus'; make system-test-deps")
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
    assert any('q="0.99"' in e and 'window="10s"' in e for e in exprs)

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


# -- Field hardening: secrets on every Kafka client, NetworkPolicy, ServiceAccount, scheduling,
# TLS, PodDisruptionBudget, emptyDir limits ------------------------------------------------------

SASL_SPARK_OPERATOR = CHART / "ci" / "sasl-spark-operator-values.yaml"
SCHEDULING = {
    "nodeSelector": {"nines/pool": "monitoring"},
    "tolerations": [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}],
    "affinity": {
        "podAntiAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 1,
                    "podAffinityTerm": {
                        "topologyKey": "kubernetes.io/hostname",
                        "labelSelector": {"matchLabels": {"app.kubernetes.io/name": "nines"}},
                    },
                }
            ]
        }
    },
}
OPERATOR = {"stream": {"mode": "spark-operator", "bootstrap": "kafka:9092"}}


def render_values(tmp_path: Path, values: dict[str, Any]) -> list[dict[str, Any]]:
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump(values))
    return render(path)


def workloads(docs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Every pod the chart runs, by role: Deployments (probe-<cluster>, stream) and the
    SparkApplication's driver and executor specs (which take the pod fields themselves)."""
    pods: dict[str, dict[str, Any]] = {}
    for d in docs:
        if d["kind"] == "Deployment":
            labels = d["spec"]["template"]["metadata"]["labels"]
            role = labels["app.kubernetes.io/component"]
            if role == "probe":
                role = f"probe-{labels['nines/cluster']}"
            pods[role] = d["spec"]["template"]["spec"]
        if d["kind"] == "SparkApplication":
            pods["driver"] = d["spec"]["driver"]
            pods["executor"] = d["spec"]["executor"]
    return pods


def kafka_clients(docs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Every container that opens a Kafka client, by role: each probe, the local-mode stream
    pod, and in spark-operator mode the driver (offsets) and the executors (the readers)."""
    clients = {}
    for role, pod in workloads(docs).items():
        if role in ("driver", "executor"):
            clients[role] = pod  # the Spark container's fields sit on the role spec itself
        else:
            [container] = pod["containers"]
            clients[role] = container
    return clients


def secret_env(container: dict[str, Any]) -> dict[str, dict[str, str]]:
    return {
        e["name"]: e["valueFrom"]["secretKeyRef"]
        for e in container.get("env") or []
        if "secretKeyRef" in e.get("valueFrom", {})
    }


def values_of(scenario: Path) -> dict[str, Any]:
    values: dict[str, Any] = helm.values_from_yaml(scenario.read_text()) or {}
    return values


@pytest.mark.parametrize(
    "scenario",
    [CHART / "ci" / "sasl-values.yaml", SASL_SPARK_OPERATOR],
    ids=lambda p: p.stem,
)
def test_every_kafka_client_has_its_secret_env(scenario: Path) -> None:
    values = values_of(scenario)
    docs = render(scenario)
    clients = kafka_clients(docs)
    operator = values["stream"].get("mode") == "spark-operator"
    stream_roles = ["driver", "executor"] if operator else ["stream"]
    expected = {f"probe-{p['cluster']}": p.get("secretEnv") or [] for p in values["probes"]}
    expected |= {role: values["stream"]["secretEnv"] for role in stream_roles}
    assert set(clients) == set(expected)
    assert values["stream"]["secretEnv"], "the scenario must set stream.secretEnv"
    for role, wanted in expected.items():
        got = secret_env(clients[role])
        for e in wanted:
            assert got.get(e["name"]) == {"name": e["secretName"], "key": e["key"]}, role


def label_match(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    """A Kubernetes LabelSelector (matchLabels, matchExpressions In/NotIn/Exists) against labels."""
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for e in selector.get("matchExpressions") or []:
        op, key = e["operator"], e["key"]
        if op == "In" and labels.get(key) not in e["values"]:
            return False
        if op == "NotIn" and labels.get(key) in e["values"]:
            return False
        if op == "Exists" and key not in labels:
            return False
    return True


def pod_labels(docs: list[dict[str, Any]]) -> dict[str, dict[str, str]]:
    labels = {}
    for d in docs:
        if d["kind"] == "Deployment":
            role = d["metadata"]["name"]
            labels[role] = d["spec"]["template"]["metadata"]["labels"]
        if d["kind"] == "SparkApplication":
            for role in ("driver", "executor"):
                labels[role] = d["spec"][role]["labels"]
    return labels


def allowed(policies: list[dict[str, Any]], direction: str, pod: dict[str, str]) -> list[Any]:
    """The ingress or egress rules that apply to a pod with these labels (policies add up)."""
    return [
        rule
        for p in policies
        if label_match(p["spec"]["podSelector"], pod)
        and direction.capitalize() in p["spec"]["policyTypes"]
        for rule in p["spec"].get(direction) or []
    ]


def test_network_policy_is_off_by_default() -> None:
    assert not [
        d for d in render(CHART / "ci" / "default-values.yaml") if d["kind"] == "NetworkPolicy"
    ]


def test_network_policy_locks_down_every_pod() -> None:
    values = values_of(SASL_SPARK_OPERATOR)["networkPolicy"]
    docs = render(SASL_SPARK_OPERATOR)
    policies = [d for d in docs if d["kind"] == "NetworkPolicy"]
    pods = pod_labels(docs)
    assert {"driver", "executor"} <= set(pods) and any("probe" in r for r in pods)
    prometheus = {
        "namespaceSelector": {"matchLabels": values["prometheus"]["namespaceSelector"]},
        "podSelector": {"matchLabels": values["prometheus"]["podSelector"]},
    }
    brokers = {(b["cidr"], port) for b in values["kafka"] for port in b["ports"]}
    dns_peers = values["dns"]
    for role, labels in pods.items():
        ingress = allowed(policies, "ingress", labels)
        egress = allowed(policies, "egress", labels)
        # every pod is isolated both ways
        assert any(label_match(p["spec"]["podSelector"], labels) for p in policies), role
        # metrics only from Prometheus (+ the Spark peers in the spark policy)
        scrape = [r for r in ingress if prometheus in r["from"]]
        assert len(scrape) == 1, role
        assert {p["port"] for p in scrape[0]["ports"]} == {9464, 9465}
        # egress: brokers, DNS, and nothing open-ended
        to_ip = {
            (peer["ipBlock"]["cidr"], port["port"])
            for r in egress
            for peer in r.get("to") or []
            if "ipBlock" in peer
            for port in r["ports"]
        }
        assert brokers <= to_ip, role
        # DNS over UDP and TCP (large answers, truncation), to the configured peers only
        dns = [r for r in egress if any(p["port"] == 53 for p in r.get("ports") or [])]
        assert len(dns) == 1 and dns[0]["to"] == dns_peers, role
        assert {(p["protocol"], p["port"]) for p in dns[0]["ports"]} == {("UDP", 53), ("TCP", 53)}
        for r in ingress + egress:
            assert r.get("from", r.get("to")), f"{role}: a rule open to everyone"
    # driver <-> executors on any port (Spark RPC, block manager): no `ports` on the rule
    for a, b in (("driver", "executor"), ("executor", "driver")):
        out = [
            r
            for r in allowed(policies, "egress", pods[a])
            if "ports" not in r
            and any(label_match(p.get("podSelector", {}), pods[b]) for p in r["to"])
        ]
        inbound = [
            r
            for r in allowed(policies, "ingress", pods[b])
            if "ports" not in r
            and any(label_match(p.get("podSelector", {}), pods[a]) for p in r["from"])
        ]
        assert out and inbound, f"{a} -> {b}"
    # only the driver reaches the API server
    api = {(a["cidr"], port) for a in values["apiServer"] for port in a["ports"]}

    def reaches_api(role: str) -> bool:
        return any(
            (peer.get("ipBlock", {}).get("cidr"), port["port"]) in api
            for r in allowed(policies, "egress", pods[role])
            for peer in r.get("to") or []
            for port in r.get("ports") or []
        )

    assert reaches_api("driver")
    assert not [role for role in pods if role != "driver" and reaches_api(role)]


def test_network_policy_needs_brokers_and_the_api_server(tmp_path: Path) -> None:
    with pytest.raises(helm.HelmError, match="networkPolicy"):
        render_values(tmp_path, {"networkPolicy": {"enabled": True}})
    brokers = {"enabled": True, "kafka": [{"cidr": "10.0.0.0/8", "ports": [9092]}]}
    assert render_values(tmp_path, {"networkPolicy": brokers})
    with pytest.raises(helm.HelmError, match="apiServer"):
        render_values(tmp_path, {**OPERATOR, "networkPolicy": brokers})


def service_accounts(docs: list[dict[str, Any]]) -> dict[str, tuple[str | None, bool | None]]:
    """role: (service account, automountServiceAccountToken) of every pod."""
    out = {}
    for role, pod in workloads(docs).items():
        if role in ("driver", "executor"):
            template = (pod.get("template") or {}).get("spec") or {}
            out[role] = (pod.get("serviceAccount"), template.get("automountServiceAccountToken"))
        else:
            out[role] = (pod.get("serviceAccountName"), pod.get("automountServiceAccountToken"))
    return out


@pytest.mark.parametrize("operator", [False, True], ids=["local", "spark-operator"])
def test_pods_run_as_a_dedicated_service_account_without_token(
    operator: bool, tmp_path: Path
) -> None:
    docs = render_values(tmp_path, OPERATOR if operator else {})
    [sa] = [d for d in docs if d["kind"] == "ServiceAccount"]
    assert sa["metadata"]["name"] == "nines"
    assert sa["automountServiceAccountToken"] is False
    accounts = service_accounts(docs)
    for role, (name, automount) in accounts.items():
        if role == "driver":
            # the driver creates its executors through the API: its own account, token mounted
            assert name == "spark" and automount is None
        else:
            assert (name, automount) == ("nines", False), role
    assert ("driver" in accounts) == operator


def test_an_existing_service_account(tmp_path: Path) -> None:
    docs = render_values(
        tmp_path, {**OPERATOR, "serviceAccount": {"create": False, "name": "monitoring-sa"}}
    )
    assert not [d for d in docs if d["kind"] == "ServiceAccount"]
    accounts = service_accounts(docs)
    assert {r: a for r, a in accounts.items() if r != "driver"} == {
        "probe-prod": ("monitoring-sa", False),
        "executor": ("monitoring-sa", False),
    }


@pytest.mark.parametrize("operator", [False, True], ids=["local", "spark-operator"])
def test_scheduling_constraints_reach_every_pod(operator: bool, tmp_path: Path) -> None:
    docs = render_values(tmp_path, {**(OPERATOR if operator else {}), **SCHEDULING})
    pods = workloads(docs)
    expected = {"probe-prod", "driver", "executor"} if operator else {"probe-prod", "stream"}
    assert set(pods) == expected
    for role, pod in pods.items():
        for field, value in SCHEDULING.items():
            assert pod.get(field) == value, (role, field)


def mounts(container: dict[str, Any], volumes: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """mount path: volume, of a container (or a SparkApplication role spec)."""
    by_name = {v["name"]: v for v in volumes}
    return {m["mountPath"]: by_name[m["name"]] for m in container.get("volumeMounts") or []}


def test_tls_mounts_the_secret_and_sets_librdkafka(tmp_path: Path) -> None:
    values = values_of(SASL_SPARK_OPERATOR)
    docs = render(SASL_SPARK_OPERATOR)
    app = spark_app(docs)
    [probe] = [d for d in docs if d["kind"] == "Deployment"]
    pod = probe["spec"]["template"]["spec"]
    [probe_cm] = [d for d in docs if "probe.yaml" in d.get("data", {})]
    probe_kafka = yaml.safe_load(probe_cm["data"]["probe.yaml"])["probe"]["kafka"]
    cases = [
        ("probe", pod["containers"][0], pod["volumes"], probe_kafka, values["probes"][0]["tls"]),
        (
            "driver",
            app["driver"],
            app["volumes"],
            stream_config(docs)["kafka"],
            values["stream"]["tls"],
        ),
        (
            "executor",
            app["executor"],
            app["volumes"],
            stream_config(docs)["kafka"],
            values["stream"]["tls"],
        ),
    ]
    for role, container, volumes, kafka, tls in cases:
        volume = mounts(container, volumes).get("/etc/nines/tls")
        assert volume and volume["secret"]["secretName"] == tls["secretName"], role
        # SASL settings and TLS: SASL_SSL
        assert kafka["security.protocol"] == "SASL_SSL", role
        assert kafka["ssl.ca.location"] == f"/etc/nines/tls/{tls['ca']}"
        assert kafka["ssl.certificate.location"] == f"/etc/nines/tls/{tls['cert']}"
        assert kafka["ssl.key.location"] == f"/etc/nines/tls/{tls['key']}"
    # TLS without SASL: SSL, in local mode too; server authentication only
    docs = render_values(tmp_path, {"stream": {"bootstrap": "k:9093", "tls": {"secretName": "ca"}}})
    kafka = stream_config(docs)["kafka"]
    assert kafka == {"security.protocol": "SSL", "ssl.ca.location": "/etc/nines/tls/ca.crt"}
    pod = workloads(docs)["stream"]
    assert mounts(pod["containers"][0], pod["volumes"])["/etc/nines/tls"]["secret"] == {
        "secretName": "ca"
    }
    # a probe's tls has the same defaults as stream.tls (ca: ca.crt)
    probe = {"cluster": "a", "bootstrap": "k:9093", "tls": {"secretName": "ca"}}
    [cm] = [
        d for d in render_values(tmp_path, {"probes": [probe]}) if "probe.yaml" in d.get("data", {})
    ]
    assert yaml.safe_load(cm["data"]["probe.yaml"])["probe"]["kafka"] == kafka
    # without TLS nothing is mounted or set
    docs = render(CHART / "ci" / "default-values.yaml")
    assert stream_config(docs)["kafka"] == {}
    for role, pod in workloads(docs).items():
        assert "/etc/nines/tls" not in mounts(pod["containers"][0], pod["volumes"]), role


def test_tls_rejects_a_plaintext_protocol(tmp_path: Path) -> None:
    stream = {"bootstrap": "k:9093", "tls": {"secretName": "ca"}}
    with pytest.raises(helm.HelmError, match=r"security\.protocol SASL_PLAINTEXT does not use TLS"):
        render_values(
            tmp_path, {"stream": {**stream, "kafka": {"security.protocol": "SASL_PLAINTEXT"}}}
        )


def test_pod_disruption_budget_does_not_block_drains(tmp_path: Path) -> None:
    assert not [
        d
        for d in render(CHART / "ci" / "default-values.yaml")
        if d["kind"] == "PodDisruptionBudget"
    ]
    docs = render_values(tmp_path, {"podDisruptionBudget": {"enabled": True}})
    [pdb] = [d for d in docs if d["kind"] == "PodDisruptionBudget"]
    kubernetes_validate.validate(pdb, K8S_VERSION, strict=True)
    [stream] = [
        d for d in docs if d["kind"] == "Deployment" and d["metadata"]["name"] == "nines-stream"
    ]
    assert label_match(pdb["spec"]["selector"], stream["spec"]["template"]["metadata"]["labels"])
    # one pod: the budget must allow evicting it
    assert stream["spec"]["replicas"] == 1 and pdb["spec"]["maxUnavailable"] >= 1


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda p: p.stem)
def test_every_empty_dir_has_a_size_limit(scenario: Path) -> None:
    docs = render(scenario)
    volumes = [
        v
        for d in docs
        if d["kind"] == "Deployment"
        for v in d["spec"]["template"]["spec"]["volumes"]
    ]
    conf: dict[str, str] = {}
    for d in docs:
        if d["kind"] == "SparkApplication":
            volumes += d["spec"]["volumes"]
            conf = d["spec"]["sparkConf"]
            # Spark adds its own scratch emptyDir unless a spark-local-dir-* volume is given
            for role in ("driver", "executor"):
                key = f"spark.kubernetes.{role}.volumes.emptyDir.spark-local-dir-1"
                assert conf[f"{key}.mount.path"] and conf[f"{key}.options.sizeLimit"], role
    empty = [v for v in volumes if "emptyDir" in v]
    assert empty
    for v in empty:
        assert v["emptyDir"].get("sizeLimit"), v["name"]


def test_stream_settings_reach_the_job_and_defaults_match_the_code(tmp_path: Path) -> None:
    from core.config import build
    from monitor.pipeline import PipelineConfig as StreamConfig  # the `stream:` section

    def stream_config(values_file: Path) -> StreamConfig:
        cm = next(d for d in render(values_file) if d["metadata"]["name"].endswith("-stream"))
        return build(StreamConfig, yaml.safe_load(cm["data"]["stream.yaml"])["stream"])

    default = stream_config(CHART / "ci" / "default-values.yaml")
    assert default.peak_hold == StreamConfig.model_fields["peak_hold"].default == 120.0
    tuned = stream_config(CHART / "ci" / "monitoring-values.yaml")
    assert tuned.peak_hold == 180.0
    assert (tuned.max_series, tuned.partition_histograms, tuned.max_clock_skew) == (20000, True, 60)
    chart = helm.Chart.load(str(CHART))
    for bad in ({"settings": {"watermark": "1m"}}, {"peakHold": "soon"}):
        with pytest.raises(helm.HelmError):
            chart.validate_schema(
                {
                    **yaml.safe_load((CHART / "values.yaml").read_text()),
                    "stream": {
                        **yaml.safe_load((CHART / "values.yaml").read_text())["stream"],
                        **bad,
                    },
                }
            )


# -- Second hardening pass: unknown keys, web config, readiness, bootstrap credentials, CPU
# limits, NetworkPolicy in production ---------------------------------------------------------

PRODUCTION = CHART / "ci" / "production-values.yaml"
#: Values that are free-form on purpose: Kubernetes' own types (validated by the API server),
#: librdkafka and stream settings (validated by nines), label maps and rule groups.
FREE_FORM = {
    "global",
    "probes.*.kafka",
    "stream.kafka",
    "stream.settings",
    "podSecurityContext",
    "securityContext",
    "nodeSelector",
    "affinity",
    "serviceAccount.annotations",
    "serviceMonitor.labels",
    "serviceMonitor.tlsConfig",
    "serviceMonitor.basicAuth",
    "prometheusRule.labels",
    "probe.resources.requests",
    "probe.resources.limits",
    "stream.resources.requests",
    "stream.resources.limits",
    "networkPolicy.prometheus.namespaceSelector",
    "networkPolicy.prometheus.podSelector",
}


def deep_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """Helm's merge of a values file over the chart's defaults (maps merge, the rest replaces)."""
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = value
    return out


def mappings(value: Any, path: str = "") -> list[tuple[str, list[Any]]]:
    """(dotted path with * for list items, key path) of every mapping in a values tree."""
    found: list[tuple[str, list[Any]]] = []

    def walk(node: Any, dotted: str, keys: list[Any]) -> None:
        if isinstance(node, dict):
            found.append((dotted, keys))
            for k, v in node.items():
                walk(v, f"{dotted}.{k}" if dotted else k, [*keys, k])
        elif isinstance(node, list):
            for i, item in enumerate(node):
                walk(item, f"{dotted}.*", [*keys, i])

    walk(value, path, [])
    return found


def with_key(values: dict[str, Any], keys: list[Any], key: str) -> dict[str, Any]:
    out = json.loads(json.dumps(values))
    node = out
    for k in keys:
        node = node[k]
    node[key] = "x"
    return out


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda p: p.stem)
def test_schema_refuses_an_unknown_key_at_every_level(scenario: Path) -> None:
    """Generated: a typo inserted into every mapping of the merged values (defaults + scenario)
    is refused by the schema, except where the value is free-form on purpose."""
    chart = helm.Chart.load(str(CHART))
    values = deep_merge(yaml.safe_load((CHART / "values.yaml").read_text()), values_of(scenario))
    chart.validate_schema(values)  # the scenario itself is valid
    checked = 0
    for dotted, keys in mappings(values):
        if dotted in FREE_FORM or any(dotted.startswith(f + ".") for f in FREE_FORM):
            continue
        if dotted.startswith(("prometheusRule.groups.*.rules", "tolerations", "networkPolicy.dns")):
            continue  # Prometheus rules and Kubernetes types
        with pytest.raises(helm.HelmError, match=r"metricsPrt|[Aa]dditional"):
            chart.validate_schema(with_key(values, keys, "metricsPrt"))
        checked += 1
    assert checked >= 15


def test_every_object_in_the_schema_is_closed_or_free_form_on_purpose() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text())

    def walk(node: Any, where: str) -> None:
        if isinstance(node, dict):
            if node.get("type") == "object" and "$ref" not in node:
                closed = node.get("additionalProperties") is False
                typed_map = isinstance(node.get("additionalProperties"), dict)
                free = "Free-form" in node.get("description", "") or where in (
                    "properties.global",
                    "properties.stream.properties.settings",
                    "properties.prometheusRule.properties.groups.items.properties.rules.items",
                    "properties.tolerations.items",
                    "properties.networkPolicy.properties.dns.items",
                )
                assert closed or typed_map or free, where
            for k, v in node.items():
                walk(v, f"{where}.{k}" if where else k)
        elif isinstance(node, list):
            for i, v in enumerate(node):
                walk(v, f"{where}.{i}")

    walk(schema, "")
    assert schema["additionalProperties"] is False


def containers_of(docs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The /metrics-serving container of every Deployment, by role."""
    return {
        role: pod["containers"][0]
        for role, pod in workloads(docs).items()
        if role not in ("driver", "executor")
    }


@pytest.mark.parametrize("scenario", [PRODUCTION, SASL_SPARK_OPERATOR], ids=lambda p: p.stem)
def test_web_config_reaches_both_metrics_servers(
    scenario: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from core.config import build
    from monitor.pipeline import PipelineConfig as StreamConfig  # the `stream:` section
    from probes.config import ProbeConfig

    monkeypatch.setenv("NATS_URL", "nats://t0ken@nats.example:4222")
    values = values_of(scenario)
    secret = values["webConfig"]["secretName"]
    docs = render(scenario)
    pods = workloads(docs)
    servers = [role for role in pods if role != "executor"]  # every pod with a /metrics
    assert any(r.startswith("probe-") for r in servers) and ({"stream", "driver"} & set(servers))
    for role in servers:
        pod = pods[role]
        if role == "driver":
            volumes = next(d for d in docs if d["kind"] == "SparkApplication")["spec"]["volumes"]
            mounts = pod["volumeMounts"]
        else:
            volumes, mounts = pod["volumes"], pod["containers"][0]["volumeMounts"]
        [web] = [v for v in volumes if v.get("secret", {}).get("secretName") == secret]
        [mount] = [m for m in mounts if m["name"] == web["name"]]
        assert mount["mountPath"] == "/etc/nines/web" and mount["readOnly"] is True, role
    # the executors serve no /metrics: no web config there
    if "executor" in pods:
        assert not [m for m in pods["executor"]["volumeMounts"] if m["name"] == "web"]
    files = []
    for d in docs:
        for key, text in (d.get("data") or {}).items():
            if key in ("probe.yaml", "stream.yaml"):
                stage = yaml.safe_load(text)[key.removesuffix(".yaml")]
                model = ProbeConfig if key == "probe.yaml" else StreamConfig
                files.append(build(model, stage).web_config_file)
    assert files and set(files) == {"/etc/nines/web/web-config.yml"}
    for role, c in containers_of(docs).items():
        assert c["readinessProbe"]["httpGet"]["scheme"] == "HTTPS", role


def test_service_monitor_scrapes_with_the_web_configs_tls_and_auth() -> None:
    values = values_of(PRODUCTION)["serviceMonitor"]
    [sm] = [d for d in render(PRODUCTION) if d["kind"] == "ServiceMonitor"]
    [endpoint] = sm["spec"]["endpoints"]
    assert endpoint["scheme"] == "https"
    assert endpoint["tlsConfig"] == values["tlsConfig"]
    assert endpoint["basicAuth"] == values["basicAuth"]
    monitoring = render(CHART / "ci" / "monitoring-values.yaml")
    [plain] = [d for d in monitoring if d["kind"] == "ServiceMonitor"]
    assert plain["spec"]["endpoints"][0]["scheme"] == "http"


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda p: p.stem)
def test_readiness_reads_the_cheap_route_not_metrics(scenario: Path) -> None:
    from runtime.webconfig import READY_PATH

    containers = containers_of(render(scenario))
    assert containers
    for role, c in containers.items():
        get = c["readinessProbe"]["httpGet"]
        assert (get["path"], get["port"]) == (READY_PATH, "metrics"), role


#: Credentials in URLs, in every shape a bootstrap may take them.
SECRET = "pa55:w@rd"
CREDENTIAL_URLS = [
    f"nats://{SECRET.replace(':', '').replace('@', '')}@nats:4222",  # a token, no user
    "nats://nines:" + SECRET.replace("@", "%40") + "@nats:4222",
    "redis://:" + SECRET.replace("@", "%40").replace(":", "%3A") + "@redis:6379/0",
    "amqp://nines:" + SECRET.replace("@", "%40").replace(":", "%3A") + "@rabbit:5672/%2f",
    f"nines:{SECRET}@kafka:9092",
]


@pytest.mark.parametrize("url", CREDENTIAL_URLS)
@pytest.mark.parametrize(
    "where", ["probes[0].bootstrap", "probes[0].echoBootstrap", "stream.bootstrap"]
)
def test_a_bootstrap_with_credentials_is_refused_without_showing_them(
    url: str, where: str, tmp_path: Path
) -> None:
    probe: dict[str, Any] = {"cluster": "c", "bootstrap": "kafka:9092"}
    values: dict[str, Any] = {"probes": [probe]}
    if where == "stream.bootstrap":
        values["stream"] = {"mode": "local", "bootstrap": url}
    else:
        probe[where.split(".")[1]] = url
    with pytest.raises(helm.HelmError) as err:
        render_values(tmp_path, values)
    message = str(err.value)
    assert where in message and "secretEnv" in message, message
    userinfo = url.split("://")[-1].rsplit("@", 1)[0]
    assert userinfo not in message and SECRET not in message


def test_a_bootstrap_url_from_secret_env(tmp_path: Path) -> None:
    probe = {"cluster": "nats", "bootstrap": "env:NATS_URL", "echoBootstrap": "kafka:9092"}
    with pytest.raises(helm.HelmError, match=r"probes\[0\].bootstrap: env:NATS_URL, but secretEnv"):
        render_values(tmp_path, {"probes": [probe]})
    with pytest.raises(helm.HelmError, match=r"probes\[0\].echoBootstrap: required"):
        render_values(
            tmp_path,
            {"probes": [{"cluster": "nats", "bootstrap": "env:NATS_URL", "secretEnv": [
                {"name": "NATS_URL", "secretName": "nats", "key": "url"}]}]},
        )  # fmt: skip
    with pytest.raises(helm.HelmError, match=r"stream\.bootstrap: a Kafka host:port list"):
        render_values(tmp_path, {"stream": {"mode": "local", "bootstrap": "env:KAFKA"}})
    docs = render(PRODUCTION)
    nats = kafka_clients(docs)["probe-prod-nats"]
    assert secret_env(nats)["NATS_URL"] == {"name": "nats-probe", "key": "url"}
    probe_files = [
        yaml.safe_load(d["data"]["probe.yaml"])["probe"]
        for d in docs
        if "probe.yaml" in (d.get("data") or {})
    ]
    assert "env:NATS_URL" in [p["bootstrap"] for p in probe_files]
    assert "nats://" not in json.dumps([d for d in docs if d["kind"] == "ConfigMap"])


def cpu_cores(quantity: str | int | float) -> float:
    """A Kubernetes CPU quantity (``2``, ``1.5``, ``500m``) in cores."""
    text = str(quantity)
    return float(text[:-1]) / 1000 if text.endswith("m") else float(text)


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda p: p.stem)
def test_every_pod_has_a_cpu_limit(scenario: Path) -> None:
    """In every mode: the probes, the local-mode stream pod, the Spark driver and executors."""
    pods = workloads(render(scenario))
    assert pods
    for role, pod in pods.items():
        if role in ("driver", "executor"):
            limit, request = pod["coreLimit"], pod["cores"]
        else:
            resources = pod["containers"][0]["resources"]
            limit, request = resources["limits"]["cpu"], resources["requests"]["cpu"]
        assert cpu_cores(limit) >= cpu_cores(request) > 0, role


def test_network_policy_in_production_admits_only_the_monitoring_namespace() -> None:
    docs = render(PRODUCTION)
    values = values_of(PRODUCTION)["networkPolicy"]
    policies = [d for d in docs if d["kind"] == "NetworkPolicy"]
    assert policies
    monitoring = {"kubernetes.io/metadata.name": "monitoring"}
    for role, labels in pod_labels(docs).items():
        ingress = allowed(policies, "ingress", labels)
        assert ingress, role
        for rule in ingress:
            for peer in rule["from"]:
                assert peer["namespaceSelector"] == {"matchLabels": monitoring}, role
        egress = allowed(policies, "egress", labels)
        to_ip = {
            (peer["ipBlock"]["cidr"], port["port"])
            for r in egress
            for peer in r.get("to") or []
            if "ipBlock" in peer
            for port in r["ports"]
        }
        assert to_ip == {(b["cidr"], p) for b in values["kafka"] for p in b["ports"]}, role


def test_network_policy_on_over_the_defaults_needs_only_the_brokers(tmp_path: Path) -> None:
    """Turning it on over a default install: the brokers are the one value it cannot guess."""
    docs = render_values(
        tmp_path,
        {"networkPolicy": {"enabled": True, "kafka": [{"cidr": "10.0.0.0/8", "ports": [9092]}]}},
    )
    [policy] = [d for d in docs if d["kind"] == "NetworkPolicy"]
    [rule] = policy["spec"]["ingress"]
    assert rule["from"][0]["namespaceSelector"] == {
        "matchLabels": {"kubernetes.io/metadata.name": "monitoring"}
    }
    # every namespace ({} with namespace ""), or only the release's (null)
    every = render_values(
        tmp_path,
        {"networkPolicy": {"enabled": True, "kafka": [{"cidr": "10.0.0.0/8", "ports": [9092]}],
                           "prometheus": {"namespace": ""}}},
    )  # fmt: skip
    [p] = [d for d in every if d["kind"] == "NetworkPolicy"]
    assert p["spec"]["ingress"][0]["from"][0]["namespaceSelector"] == {}


# -- The archive fits its volume ------------------------------------------------------------------

GIB = 1 << 30
#: The archive's measured growth (docs/architecture.md: bench.archive_disk, 12 partitions,
#: compacted) and the stream's default retention in days.
ARCHIVE_BYTES_PER_DAY = 0.89e9
RETENTION_DAYS = 35


def pvc_bytes(docs: list[dict[str, Any]]) -> int:
    [pvc] = [d for d in docs if d["kind"] == "PersistentVolumeClaim"]
    size = pvc["spec"]["resources"]["requests"]["storage"]
    assert size.endswith("Gi"), size
    return int(size.removesuffix("Gi")) * GIB


@pytest.mark.parametrize("scenario", ["default-values.yaml", "spark-operator-values.yaml"])
def test_the_archive_is_capped_below_its_volume(scenario: str) -> None:
    """archive_max_size is 80 % of the volume: the archive never fills the checkpoint's volume."""
    docs = render(CHART / "ci" / scenario)
    cap, volume = stream_config(docs)["archive_max_size"], pvc_bytes(docs)
    assert cap == volume * 80 // 100


def test_the_default_volume_holds_the_default_retention() -> None:
    docs = render(CHART / "ci" / "default-values.yaml")
    assert stream_config(docs)["archive_max_size"] >= RETENTION_DAYS * ARCHIVE_BYTES_PER_DAY


def test_archive_cap_settings(tmp_path: Path) -> None:
    local = {"stream": {"bootstrap": "kafka:9092"}}
    cap = {**local["stream"], "persistence": {"size": "500Mi"}, "archiveVolumePercent": 50}
    assert stream_config(render_values(tmp_path, {"stream": cap}))["archive_max_size"] == (
        250 << 20
    )
    fixed = {**local["stream"], "archiveMaxSize": "12Gi"}
    assert stream_config(render_values(tmp_path, {"stream": fixed}))["archive_max_size"] == (
        12 * GIB
    )
    off = {**local["stream"], "archive": False}
    assert "archive_max_size" not in stream_config(render_values(tmp_path, {"stream": off}))
    claim = {**OPERATOR["stream"], "sparkOperator": {"persistence": {"existingClaim": "x"}}}
    with pytest.raises(helm.HelmError, match=r"stream\.archiveMaxSize: required"):
        render_values(tmp_path, {"stream": claim})
    docs = render(CHART / "ci" / "spark-operator-existing-claim-values.yaml")
    assert stream_config(docs)["archive_max_size"] == 30 * GIB
    odd = {**local["stream"], "persistence": {"size": "1.5Gi"}}
    with pytest.raises(helm.HelmError, match=r"stream\.persistence\.size"):
        render_values(tmp_path, {"stream": odd})


# -- AWS MSK IAM (docs/deploy.md, "AWS MSK IAM") -------------------------------------------------


def built_configs(docs: list[dict[str, Any]]) -> tuple[Any, Any]:
    """The probe's and the stream's config as the chart renders them into its ConfigMaps, built
    through their models (ProbeConfig, PipelineConfig), as the pods read them."""
    from core.config import build
    from monitor.pipeline import PipelineConfig
    from probes.config import ProbeConfig

    sections = {
        key.removesuffix(".yaml"): yaml.safe_load(body)
        for d in docs
        if d["kind"] == "ConfigMap"
        for key, body in (d.get("data") or {}).items()
        if key in ("probe.yaml", "stream.yaml")
    }
    probe = build(ProbeConfig, sections["probe"]["probe"], prefix="probe")
    return probe, build(PipelineConfig, sections["stream"]["stream"], prefix="stream")


def test_msk_iam_role_on_the_service_account_and_login_in_both_configs(tmp_path: Path) -> None:
    docs = render(CHART / "ci" / "msk-iam-values.yaml")
    [sa] = [d for d in docs if d["kind"] == "ServiceAccount"]
    role = "arn:aws:iam::123456789012:role/nines-msk"
    assert sa["metadata"]["annotations"] == {"eks.amazonaws.com/role-arn": role}
    probe, stream = built_configs(docs)
    for config in (probe, stream):
        assert (config.kafka_login, config.aws_region) == ("aws-msk-iam", "eu-west-1")
    # the user's own annotations stay beside the role's; a TLS Secret means SASL_SSL here
    docs = render_values(tmp_path, {
        "serviceAccount": {"awsRoleArn": role, "annotations": {"team": "obs"}},
        "probes": [{"cluster": "m", "bootstrap": "b:9098", "kafkaLogin": "aws-msk-iam",
                    "awsRegion": "eu-west-1", "tls": {"secretName": "ca"}}],
    })  # fmt: skip
    [sa] = [d for d in docs if d["kind"] == "ServiceAccount"]
    assert sa["metadata"]["annotations"] == {"eks.amazonaws.com/role-arn": role, "team": "obs"}
    [cm] = [d for d in docs if d["kind"] == "ConfigMap" and "probe.yaml" in d.get("data", {})]
    kafka = yaml.safe_load(cm["data"]["probe.yaml"])["probe"]["kafka"]
    assert kafka["security.protocol"] == "SASL_SSL"
    chart = helm.Chart.load(str(CHART))
    for bad in ({"awsRoleArn": "nines-msk"}, {"awsRoleArn": "arn:aws:iam::12:role/x"}):
        with pytest.raises(helm.HelmError):
            chart.validate_schema({"serviceAccount": bad})
    with pytest.raises(helm.HelmError):
        chart.validate_schema({"probes": [{"cluster": "m", "bootstrap": "b:1", "awsRegion": "EU"}]})


# -- OIDC (docs/deploy.md, "OIDC (OAUTHBEARER)") -------------------------------------------------


def test_oidc_client_secret_from_a_secret_never_a_configmap(tmp_path: Path) -> None:
    docs = render(CHART / "ci" / "oidc-values.yaml")
    probe, stream = built_configs(docs)
    for config in (probe, stream):
        assert config.kafka_login == "oidc"
        assert reveal(config.kafka)["sasl.oauthbearer.client.secret"] == "env:OIDC_CLIENT_SECRET"
        assert config.kafka["security.protocol"] == "SASL_SSL"  # the TLS Secret, with a login
    [deploy] = [d for d in docs if d["kind"] == "Deployment" and "probe" in d["metadata"]["name"]]
    env = deploy["spec"]["template"]["spec"]["containers"][0]["env"]
    assert {"name": "OIDC_CLIENT_SECRET", "valueFrom": {"secretKeyRef": {
        "name": "nines-oidc", "key": "client-secret"}}} in env  # fmt: skip
    # a literal secret is refused by the schema, without quoting it
    literal = "s3cr3t-literal-value"
    with pytest.raises(helm.HelmError) as refused:
        kafka = {"sasl.oauthbearer.client.secret": literal}
        probe = {"cluster": "o", "bootstrap": "b:9093", "kafkaLogin": "oidc", "kafka": kafka}
        render_values(tmp_path, {"probes": [probe]})
    assert literal not in str(refused.value)
