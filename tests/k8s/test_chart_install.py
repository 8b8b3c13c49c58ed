"""Every scenario in helm/nines/ci installed for real with helm-python-sdk on a live control plane.

Each scenario gets a namespace that enforces Pod Security ``restricted``, the Secrets its values
name, and static PersistentVolumes for its claims; all are installed at once (one release each).
Then what only a live API answers: every Deployment Available on kwok's nodes, selectors that
match their pods, the ServiceMonitor's Service and port, the NetworkPolicies' rules against a
live Prometheus pod, the PrometheusRule through the real CRD, the Spark driver's permissions by
SubjectAccessReview, and each pod's configuration through the product's own loader. Then an
upgrade that rolls every Deployment, and an uninstall that leaves nothing behind.
"""

from __future__ import annotations

import base64
import copy
import ipaddress
import re
import textwrap
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import helm_python as helm
import pytest
import yaml
from helm_render import CHART, ROOT, SCENARIOS, render, values_of
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from live_kube import Kube, wait_until

from core.config import build, section
from monitor.pipeline import PipelineConfig
from probes.config import ProbeConfig
from runtime.config_io import load_yaml, resolve_secret, resolve_secrets

RELEASE = "nines"
HELM_TIMEOUT_S = 180
#: The namespace and labels of the Prometheus the NetworkPolicies must admit (the chart's
#: networkPolicy.prometheus defaults, and the sasl-spark-operator scenario's selectors).
PROMETHEUS_NS = "monitoring"
PROMETHEUS_LABELS = {"app.kubernetes.io/name": "prometheus"}
#: What a secretEnv variable holds in these tests (a URL where the config reads one).
SECRET_URL = "nats://t0ken@nats.example:4222"
SECRET_VALUE = "s3cret"
#: The upgrade: a new image (every pod template changes) and, in local mode, a PDB.
UPGRADE = {"image": {"tag": "upgrade-test"}}


def namespace_of(scenario: Path) -> str:
    return "nines-" + scenario.stem.removesuffix("-values")


def kinds_of(scenario: Path) -> set[str]:
    return {d["kind"] for d in render(values_of(scenario), namespace=namespace_of(scenario))}


KINDS = {s: kinds_of(s) for s in SCENARIOS}


def scenarios_with(kind: str) -> list[Path]:
    return [s for s in SCENARIOS if kind in KINDS[s]]


def ids(p: Path) -> str:
    return p.stem


@dataclass
class Release:
    scenario: Path
    namespace: str
    values: dict[str, Any]
    docs: list[dict[str, Any]] = field(default_factory=list)
    error: BaseException | None = None

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        return [d for d in self.docs if d["kind"] == kind]

    def check(self) -> None:
        if self.error is not None:
            pytest.fail(f"{self.scenario.name}: {type(self.error).__name__}: {self.error}")


def _secret_refs(docs: list[dict[str, Any]]) -> dict[str, dict[str, str]]:
    """Every Secret a manifest names, with the keys its env references read."""
    refs: dict[str, dict[str, str]] = {}

    def walk(node: object) -> None:
        if isinstance(node, dict):
            ref = node.get("secretKeyRef")
            if isinstance(ref, dict):
                refs.setdefault(ref["name"], {})[ref["key"]] = ""
            secret = node.get("secret")
            if isinstance(secret, dict) and "secretName" in secret:
                refs.setdefault(secret["secretName"], {})
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(docs)
    return refs


def _env_values(values: dict[str, Any]) -> dict[tuple[str, str], str]:
    """(secret, key) -> what the test puts there, by the secretEnv variable that reads it."""
    out: dict[tuple[str, str], str] = {}
    for where in [*(values.get("probes") or []), values.get("stream") or {}]:
        for e in where.get("secretEnv") or []:
            url = e["name"].endswith("_URL")
            out[(e["secretName"], e["key"])] = SECRET_URL if url else SECRET_VALUE
    return out


def _prepare(kube: Kube, rel: Release) -> None:
    """The namespace (Pod Security restricted), the Secrets and the static PVs it needs."""
    ns = rel.namespace
    kube.apply(
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {
                "name": ns,
                "labels": {
                    f"pod-security.kubernetes.io/{mode}": "restricted"
                    for mode in ("enforce", "warn", "audit")
                }
                | {"pod-security.kubernetes.io/enforce-version": "latest"},
            },
        }
    )
    env = _env_values(rel.values)
    for name, keys in _secret_refs(rel.docs).items():
        data = {key: env.get((name, key), SECRET_VALUE) for key in keys} or {"ca.crt": "x"}
        kube.apply(
            {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name}, "stringData": data},
            namespace=ns,
        )
    claims = [(d["metadata"]["name"], d["spec"]) for d in rel.of_kind("PersistentVolumeClaim")]
    existing = rel.values.get("stream", {}).get("sparkOperator", {}).get("persistence", {})
    if existing.get("existingClaim"):  # the user's claim, made here as the user would
        spec = {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "50Gi"}}}
        kube.apply(
            {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "metadata": {"name": existing["existingClaim"]},
                "spec": spec,
            },
            namespace=ns,
        )
        claims.append((existing["existingClaim"], spec))
    for claim, spec in claims:
        kube.apply(
            {
                "apiVersion": "v1",
                "kind": "PersistentVolume",
                "metadata": {"name": f"{ns}-{claim}"[:63]},
                "spec": {
                    "capacity": {"storage": spec["resources"]["requests"]["storage"]},
                    "accessModes": spec["accessModes"],
                    "storageClassName": spec.get("storageClassName", ""),
                    "persistentVolumeReclaimPolicy": "Retain",
                    # nothing mounts it: kwok runs no containers
                    "hostPath": {"path": f"/nonexistent/{ns}/{claim}"},
                    "claimRef": {"namespace": ns, "name": claim},
                },
            }
        )


def _install(kube: Kube, rel: Release) -> None:
    try:
        _prepare(kube, rel)
        kube.helm(rel.namespace).install(
            helm.Chart.load(str(CHART)),
            RELEASE,
            rel.values,
            namespace=rel.namespace,
            wait="watcher",
            timeout=HELM_TIMEOUT_S,
        )
    except BaseException as exc:  # reported by the scenario's own test
        rel.error = exc


def _all_at_once(releases: list[Release], step: Callable[[Release], None]) -> None:
    with ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(step, releases))


@pytest.fixture(scope="module")
def prometheus_pod(kube: Kube) -> client.V1Pod:
    """A Prometheus pod (on a kwok node) in the namespace the NetworkPolicies admit scrapes from."""
    kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": PROMETHEUS_NS}})
    kube.apply(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "prometheus-0", "labels": PROMETHEUS_LABELS},
            "spec": {
                "containers": [{"name": "prometheus", "image": "prom/prometheus"}],
                "nodeSelector": {"type": "kwok"},
                "tolerations": [{"operator": "Exists"}],
            },
        },
        namespace=PROMETHEUS_NS,
    )
    return wait_until(
        "the Prometheus pod running",
        lambda: (
            (p := kube.core.read_namespaced_pod("prometheus-0", PROMETHEUS_NS)).status.phase
            == "Running"
            and p
        ),
    )


@pytest.fixture(scope="module")
def releases(kube: Kube) -> Iterator[dict[Path, Release]]:
    """Every scenario installed, concurrently, each in its own namespace."""
    rels = {
        s: Release(s, namespace_of(s), values_of(s), render(values_of(s), RELEASE, namespace_of(s)))
        for s in SCENARIOS
    }
    _all_at_once(list(rels.values()), lambda r: _install(kube, r))
    yield rels


def _deployments(kube: Kube, rel: Release) -> list[client.V1Deployment]:
    return [
        kube.apps.read_namespaced_deployment(d["metadata"]["name"], rel.namespace)
        for d in rel.of_kind("Deployment")
    ]


def _replicas_selected(deployments: list[dict[str, Any]], match: dict[str, str]) -> int:
    """How many pods ``deployments`` run under labels ``match`` selects."""
    return sum(
        d["spec"].get("replicas", 1)
        for d in deployments
        if match.items() <= d["spec"]["template"]["metadata"]["labels"].items()
    )


def _available(dep: client.V1Deployment) -> bool:
    conditions = dep.status.conditions or []
    return any(c.type == "Available" and c.status == "True" for c in conditions)


def _selector(labels: dict[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in labels.items())


def _label_selector(sel: dict[str, Any]) -> str:
    """A LabelSelector as the API's label_selector query string."""
    parts = [f"{k}={v}" for k, v in (sel.get("matchLabels") or {}).items()]
    for e in sel.get("matchExpressions") or []:
        op = {"In": "in", "NotIn": "notin"}.get(e["operator"])
        if op:
            parts.append(f"{e['key']} {op} ({','.join(e['values'])})")
        elif e["operator"] == "Exists":
            parts.append(e["key"])
        else:
            parts.append(f"!{e['key']}")
    return ",".join(parts)


# -- install ---------------------------------------------------------------------------------


@pytest.mark.parametrize("scenario", SCENARIOS, ids=ids)
def test_installs_under_restricted_pod_security(
    kube: Kube, releases: dict[Path, Release], scenario: Path
) -> None:
    rel = releases[scenario]
    rel.check()
    ns = kube.core.read_namespace(rel.namespace)
    assert ns.metadata.labels["pod-security.kubernetes.io/enforce"] == "restricted"
    status = kube.helm(rel.namespace).status(RELEASE)
    assert (status["status"], status["revision"]) == ("deployed", 1)
    # what the API server stored is what was rendered, kind for kind
    for d in rel.docs:
        live = kube.get(d["apiVersion"], d["kind"], d["metadata"]["name"], rel.namespace)
        assert live.metadata.labels["app.kubernetes.io/instance"] == RELEASE
    for claim in rel.of_kind("PersistentVolumeClaim"):
        pvc = kube.core.read_namespaced_persistent_volume_claim(
            claim["metadata"]["name"], rel.namespace
        )
        assert pvc.status.phase == "Bound", claim["metadata"]["name"]


@pytest.mark.parametrize("scenario", scenarios_with("Deployment"), ids=ids)
def test_every_deployment_becomes_available_on_kwok_nodes(
    kube: Kube, releases: dict[Path, Release], scenario: Path
) -> None:
    rel = releases[scenario]
    rel.check()
    deployments = _deployments(kube, rel)
    assert deployments
    for dep in deployments:
        assert _available(dep), (dep.metadata.name, dep.status.conditions)
        pods = kube.core.list_namespaced_pod(
            rel.namespace, label_selector=_selector(dep.spec.selector.match_labels)
        ).items
        assert [p.status.phase for p in pods] == ["Running"] * dep.spec.replicas
        for pod in pods:
            assert pod.spec.node_name in {"kwok-general", "kwok-monitoring"}
            # admitted under `restricted`: the pod as stored runs as non-root, no escalation
            assert pod.spec.security_context.run_as_non_root is True
            assert pod.spec.security_context.seccomp_profile.type == "RuntimeDefault"


@pytest.mark.parametrize("scenario", scenarios_with("SparkApplication"), ids=ids)
def test_spark_application_is_stored_with_its_env(
    kube: Kube, releases: dict[Path, Release], scenario: Path
) -> None:
    rel = releases[scenario]
    rel.check()
    (doc,) = rel.of_kind("SparkApplication")
    app = kube.get(doc["apiVersion"], doc["kind"], doc["metadata"]["name"], rel.namespace)
    secret_env = rel.values["stream"].get("secretEnv") or []
    for role in ("driver", "executor"):
        env = app.spec[role].get("env")
        assert [e["name"] for e in env or []] == [e["name"] for e in secret_env]


def test_the_crd_rejects_the_old_templates_null_env(
    kube: Kube, releases: dict[Path, Release]
) -> None:
    """The bug the render test guards: a bare ``env:`` is refused by a real install."""
    rel = releases[CHART / "ci" / "spark-operator-values.yaml"]
    rel.check()
    (doc,) = rel.of_kind("SparkApplication")
    broken = copy.deepcopy(doc)
    broken["metadata"]["name"] = "nines-null-env"
    broken["spec"]["driver"]["env"] = None
    broken["spec"]["executor"]["env"] = None
    with pytest.raises(ApiException) as caught:
        kube.apply(broken, namespace=rel.namespace)
    assert "must be of type array" in caught.value.body, caught.value.body


# -- what a render cannot check --------------------------------------------------------------


@pytest.mark.parametrize("scenario", SCENARIOS, ids=ids)
def test_selectors_match_their_pods(
    kube: Kube, releases: dict[Path, Release], scenario: Path
) -> None:
    rel = releases[scenario]
    rel.check()
    for dep in _deployments(kube, rel):
        pods = kube.core.list_namespaced_pod(
            rel.namespace, label_selector=_selector(dep.spec.selector.match_labels)
        ).items
        assert len(pods) == dep.spec.replicas, dep.metadata.name
        # no other Deployment's pods: each pod is owned by this Deployment's ReplicaSet
        for pod in pods:
            (owner,) = pod.metadata.owner_references
            rs = kube.apps.read_namespaced_replica_set(owner.name, rel.namespace)
            assert rs.metadata.owner_references[0].name == dep.metadata.name
    sparkapps = [
        kube.get(d["apiVersion"], d["kind"], d["metadata"]["name"], rel.namespace)
        for d in rel.of_kind("SparkApplication")
    ]
    for svc in kube.core.list_namespaced_service(
        rel.namespace, label_selector=f"app.kubernetes.io/instance={RELEASE}"
    ).items:
        selector = svc.spec.selector
        pods = kube.core.list_namespaced_pod(rel.namespace, label_selector=_selector(selector))
        if pods.items:
            # the endpoints controller found them: the Service routes to live pod IPs
            wait_until(
                f"{svc.metadata.name}'s endpoints",
                lambda s=svc: any(
                    e.conditions.ready
                    for sl in client.DiscoveryV1Api(kube.api)
                    .list_namespaced_endpoint_slice(
                        rel.namespace,
                        label_selector=f"kubernetes.io/service-name={s.metadata.name}",
                    )
                    .items
                    for e in sl.endpoints or []
                ),
            )
        else:
            # spark-operator mode: the driver the operator would start carries the labels
            assert sparkapps, f"{svc.metadata.name} selects no pod"
            driver_labels = sparkapps[0].spec.driver.labels
            assert selector.items() <= dict(driver_labels).items(), svc.metadata.name


@pytest.mark.parametrize("scenario", scenarios_with("ServiceMonitor"), ids=ids)
def test_service_monitor_selects_the_metrics_service_on_a_port_it_has(
    kube: Kube, releases: dict[Path, Release], scenario: Path
) -> None:
    rel = releases[scenario]
    rel.check()
    (doc,) = rel.of_kind("ServiceMonitor")
    sm = kube.get(doc["apiVersion"], doc["kind"], doc["metadata"]["name"], rel.namespace)
    services = kube.core.list_namespaced_service(
        rel.namespace, label_selector=_label_selector(sm.spec.selector.to_dict())
    ).items
    assert services, "the ServiceMonitor selects no Service"
    for endpoint in sm.spec.endpoints:
        for svc in services:
            ports = {p.name: p for p in svc.spec.ports}
            assert endpoint.port in ports, (svc.metadata.name, endpoint.port)
            # ... and that port is a container port serving /metrics in the pods behind it
            target = ports[endpoint.port].target_port
            pods = kube.core.list_namespaced_pod(
                rel.namespace, label_selector=_selector(svc.spec.selector)
            ).items
            for pod in pods:
                container_ports = {p.container_port for c in pod.spec.containers for p in c.ports}
                assert target in container_ports, (svc.metadata.name, target)
    # the probes' Service has pods in every mode: the scrape has a target
    assert any(
        kube.core.list_namespaced_pod(
            rel.namespace, label_selector=_selector(s.spec.selector)
        ).items
        for s in services
    )


@pytest.mark.parametrize("scenario", scenarios_with("PrometheusRule"), ids=ids)
def test_prometheus_rule_is_accepted_by_the_real_crd(
    kube: Kube, releases: dict[Path, Release], scenario: Path
) -> None:
    rel = releases[scenario]
    rel.check()
    (doc,) = rel.of_kind("PrometheusRule")
    rule = kube.get(doc["apiVersion"], doc["kind"], doc["metadata"]["name"], rel.namespace)
    stored = [r.to_dict() for g in rule.spec.groups for r in g.rules]
    assert stored == [r for g in doc["spec"]["groups"] for r in g["rules"]]
    assert any("for" in r for r in stored)
    # the CRD checks what it stored: a duration it cannot parse is refused
    broken = copy.deepcopy(doc)
    broken["metadata"]["name"] = "nines-bad-duration"
    first = next(r for g in broken["spec"]["groups"] for r in g["rules"] if "for" in r)
    first["for"] = "5 minutes"
    with pytest.raises(ApiException) as caught:
        kube.apply(broken, namespace=rel.namespace)
    assert caught.value.status == 422, caught.value.body


def _pod_admits(policy: Any, pod: client.V1Pod, pod_ns: str, port: int, kube: Kube) -> bool:
    """Whether one of ``policy``'s ingress rules admits TCP ``port`` from ``pod`` (live
    selectors: the namespaces and pods the API lists for them)."""
    for rule in policy.spec.ingress or []:
        ports = {p.port for p in rule.ports or []}
        if ports and port not in ports:
            continue
        for peer in rule._from or []:
            ns_ok = peer.namespace_selector is None and pod_ns == policy.metadata.namespace
            if peer.namespace_selector is not None:
                names = kube.core.list_namespace(
                    label_selector=_label_selector(peer.namespace_selector.to_dict())
                )
                ns_ok = pod_ns in {n.metadata.name for n in names.items}
            if not ns_ok:
                continue
            if peer.pod_selector is None:
                return True
            selected = kube.core.list_namespaced_pod(
                pod_ns, label_selector=_label_selector(peer.pod_selector.to_dict())
            )
            if pod.metadata.name in {p.metadata.name for p in selected.items}:
                return True
    return False


def _egress_admits(policy: Any, ports_needed: set[int], protocol: str = "TCP") -> set[int]:
    """The ports of ``ports_needed`` some egress rule allows to an IP block."""
    allowed: set[int] = set()
    for rule in policy.spec.egress or []:
        blocks = [p.ip_block for p in rule.to or [] if p.ip_block is not None]
        if not blocks:
            continue
        for block in blocks:
            ipaddress.ip_network(block.cidr)  # a CIDR the API accepted and we can parse
        allowed |= {p.port for p in rule.ports or [] if p.protocol == protocol} & ports_needed
    return allowed


def _bootstrap_ports(config_text: str, env: dict[str, str]) -> set[int]:
    """The broker ports a pod's config connects to (an ``env:`` bootstrap resolved)."""
    values = yaml.safe_load(config_text)
    cfg = next(iter(values.values()))
    ports: set[int] = set()
    for key in ("bootstrap", "echo_bootstrap"):
        value = cfg.get(key)
        if not value:
            continue
        if value.startswith("env:"):
            value = env[value[4:]]
        for part in value.split(","):
            if "://" in part:
                ports.add(urlsplit(part).port or 0)
            else:
                ports.add(int(part.rsplit(":", 1)[1]))
    return ports


@pytest.mark.parametrize("scenario", scenarios_with("NetworkPolicy"), ids=ids)
def test_network_policy_admits_scrapes_and_broker_traffic(
    kube: Kube, releases: dict[Path, Release], scenario: Path, prometheus_pod: client.V1Pod
) -> None:
    rel = releases[scenario]
    rel.check()
    net = client.NetworkingV1Api(kube.api)
    policies = net.list_namespaced_network_policy(rel.namespace).items
    assert policies
    pods = kube.core.list_namespaced_pod(
        rel.namespace, label_selector=f"app.kubernetes.io/instance={RELEASE}"
    ).items
    assert pods
    for pod in pods:
        applying = [
            p
            for p in policies
            if pod.metadata.name
            in {
                q.metadata.name
                for q in kube.core.list_namespaced_pod(
                    rel.namespace, label_selector=_label_selector(p.spec.pod_selector.to_dict())
                ).items
            }
        ]
        assert applying, f"no NetworkPolicy selects {pod.metadata.name}"
        metrics = next(p.container_port for c in pod.spec.containers for p in c.ports)
        assert any(
            _pod_admits(p, prometheus_pod, PROMETHEUS_NS, metrics, kube) for p in applying
        ), f"Prometheus may not scrape {pod.metadata.name}:{metrics}"
        env = _pod_env(kube, rel.namespace, pod.spec.containers[0].env)
        text = _pod_config(kube, rel.namespace, pod)[1]
        needed = _bootstrap_ports(text, env)
        allowed = set().union(*(_egress_admits(p, needed) for p in applying))
        assert allowed == needed, f"{pod.metadata.name}: broker ports {needed - allowed} blocked"
        dns = set().union(*(_egress_admits_any(p, 53) for p in applying))
        assert dns == {"UDP", "TCP"}, f"{pod.metadata.name}: DNS egress {dns}"


def _egress_admits_any(policy: Any, port: int) -> set[str]:
    """The protocols some egress rule allows on ``port`` (any destination rule)."""
    return {
        p.protocol for rule in policy.spec.egress or [] for p in rule.ports or [] if p.port == port
    }


def _read_driver_role() -> dict[str, Any]:
    """The Role docs/deploy.md tells a user the Spark driver's account needs."""
    text = (ROOT / "docs" / "deploy.md").read_text()
    for block in re.findall(r"```yaml\n(.*?)```", text, re.S):
        doc = yaml.safe_load(textwrap.dedent(block))  # the block is indented in a list
        if isinstance(doc, dict) and doc.get("kind") == "Role":
            return doc
    raise AssertionError("docs/deploy.md shows no Role for the Spark driver")


@pytest.mark.parametrize("scenario", scenarios_with("SparkApplication"), ids=ids)
def test_spark_driver_account_may_manage_executor_pods(
    kube: Kube, releases: dict[Path, Release], scenario: Path
) -> None:
    rel = releases[scenario]
    rel.check()
    (doc,) = rel.of_kind("SparkApplication")
    app = kube.get(doc["apiVersion"], doc["kind"], doc["metadata"]["name"], rel.namespace)
    driver_sa, executor_sa = app.spec.driver.serviceAccount, app.spec.executor.serviceAccount
    # what the Spark Operator chart (or the user, per docs/deploy.md) sets up for the driver
    role = _read_driver_role()
    kube.apply({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": driver_sa}},
               namespace=rel.namespace)  # fmt: skip
    kube.apply(role, namespace=rel.namespace)
    kube.apply(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": "nines-spark-driver"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "Role",
                "name": role["metadata"]["name"],
            },
            "subjects": [{"kind": "ServiceAccount", "name": driver_sa, "namespace": rel.namespace}],
        },
        namespace=rel.namespace,
    )
    reviews = kube.dynamic.resources.get(
        api_version="authorization.k8s.io/v1", kind="SubjectAccessReview"
    )

    def allowed(sa: str, verb: str) -> bool:
        """The API server's answer: may this account ``verb`` pods in the namespace?"""
        review = reviews.create(
            body={
                "apiVersion": "authorization.k8s.io/v1",
                "kind": "SubjectAccessReview",
                "spec": {
                    "user": f"system:serviceaccount:{rel.namespace}:{sa}",
                    "groups": ["system:serviceaccounts", f"system:serviceaccounts:{rel.namespace}"],
                    "resourceAttributes": {
                        "namespace": rel.namespace,
                        "verb": verb,
                        "resource": "pods",
                    },
                },
            }
        )
        return bool(review.status.allowed)

    for verb in ("create", "delete", "watch"):
        assert allowed(driver_sa, verb), f"{driver_sa} may not {verb} pods"
        # the executors' account (the chart's) holds no API rights at all
        assert not allowed(executor_sa, verb), f"{executor_sa} may {verb} pods"


def _pod_env(kube: Kube, namespace: str, env: list[Any] | None) -> dict[str, str]:
    """A container's environment as the kubelet would set it, read from the live Secrets."""
    out: dict[str, str] = {}
    for e in env or []:
        e = e if isinstance(e, dict) else kube.api.sanitize_for_serialization(e)
        if "value" in e:
            out[e["name"]] = e["value"]
        elif "secretKeyRef" in e.get("valueFrom", {}):
            ref = e["valueFrom"]["secretKeyRef"]
            secret = kube.core.read_namespaced_secret(ref["name"], namespace)
            out[e["name"]] = base64.b64decode(secret.data[ref["key"]]).decode()
    return out


def _pod_config(kube: Kube, namespace: str, pod: client.V1Pod) -> tuple[str, str]:
    """The config file a pod's args name (``--config=/etc/nines/X``), from its ConfigMap."""
    container = pod.spec.containers[0]
    path = next(a.split("=", 1)[1] for a in container.args if a.startswith("--config="))
    volume = next(
        m.name for m in container.volume_mounts if path.startswith(m.mount_path.rstrip("/") + "/")
    )
    cm_name = next(v.config_map.name for v in pod.spec.volumes if v.name == volume)
    cm = kube.core.read_namespaced_config_map(cm_name, namespace)
    key = path.rsplit("/", 1)[1]
    return key, cm.data[key]


def _load_with_the_products_loader(
    key: str, text: str, env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What ``nines probe|stream --config`` does with the file before it connects anywhere."""
    with monkeypatch.context() as m:
        for name, value in env.items():
            m.setenv(name, value)
        path = tmp_path / key
        path.write_text(text)
        if key == "probe.yaml":
            probe = build(ProbeConfig, section(load_yaml(path), "probe"), prefix="probe")
            probe.client_settings()  # every env: secret resolves
            resolve_secret(probe.bootstrap_url())
        else:
            stream = build(PipelineConfig, section(load_yaml(path), "stream"), prefix="stream")
            resolve_secrets(stream.kafka)


@pytest.mark.parametrize("scenario", SCENARIOS, ids=ids)
def test_each_pods_config_loads_with_the_products_loader(
    kube: Kube,
    releases: dict[Path, Release],
    scenario: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rel = releases[scenario]
    rel.check()
    loaded = 0
    for pod in kube.core.list_namespaced_pod(
        rel.namespace, label_selector=f"app.kubernetes.io/instance={RELEASE}"
    ).items:
        env = _pod_env(kube, rel.namespace, pod.spec.containers[0].env)
        key, text = _pod_config(kube, rel.namespace, pod)
        _load_with_the_products_loader(key, text, env, tmp_path, monkeypatch)
        loaded += 1
    for doc in rel.of_kind("SparkApplication"):
        app = kube.get(doc["apiVersion"], doc["kind"], doc["metadata"]["name"], rel.namespace)
        config = next(v for v in app.spec.volumes if v.name == "config")
        cm = kube.core.read_namespaced_config_map(config.configMap.name, rel.namespace)
        path = next(a.split("=", 1)[1] for a in app.spec.arguments if a.startswith("--config="))
        key = path.rsplit("/", 1)[1]
        for role in ("driver", "executor"):
            env = _pod_env(kube, rel.namespace, [e.to_dict() for e in app.spec[role].env or []])
            _load_with_the_products_loader(key, cm.data[key], env, tmp_path, monkeypatch)
            loaded += 1
    assert loaded >= len(rel.values.get("probes") or [{}]) + 1


# -- upgrade and uninstall -------------------------------------------------------------------


def _upgrade_values(rel: Release) -> dict[str, Any]:
    values = copy.deepcopy(rel.values) | UPGRADE
    if rel.values.get("stream", {}).get("mode", "local") == "local":
        values["podDisruptionBudget"] = {"enabled": True, "maxUnavailable": 1}
    return values


@pytest.fixture(scope="module")
def upgraded(kube: Kube, releases: dict[Path, Release]) -> dict[Path, BaseException | None]:
    """Every release upgraded at once with changed values (a new image tag, a PDB)."""

    def upgrade(rel: Release) -> None:
        kube.helm(rel.namespace).upgrade(
            helm.Chart.load(str(CHART)),
            RELEASE,
            _upgrade_values(rel),
            namespace=rel.namespace,
            wait="watcher",
            timeout=HELM_TIMEOUT_S,
        )

    return _each(releases, upgrade)


def _each(
    releases: dict[Path, Release], act: Callable[[Release], object]
) -> dict[Path, BaseException | None]:
    """``act`` on every release at once (each checked first); per scenario, what it raised."""
    errors: dict[Path, BaseException | None] = {}

    def run(rel: Release) -> None:
        try:
            rel.check()
            act(rel)
            errors[rel.scenario] = None
        except BaseException as exc:
            errors[rel.scenario] = exc

    _all_at_once(list(releases.values()), run)
    return errors


@pytest.mark.parametrize("scenario", SCENARIOS, ids=ids)
def test_upgrade_rolls_every_deployment(
    kube: Kube,
    releases: dict[Path, Release],
    upgraded: dict[Path, BaseException | None],
    scenario: Path,
) -> None:
    rel = releases[scenario]
    if upgraded[scenario] is not None:
        pytest.fail(f"helm upgrade {scenario.name}: {upgraded[scenario]}")
    assert kube.helm(rel.namespace).status(RELEASE)["revision"] == 2
    for dep in _deployments(kube, rel):
        assert dep.metadata.annotations["deployment.kubernetes.io/revision"] == "2"
        assert dep.status.updated_replicas == dep.spec.replicas
        assert _available(dep)
        pods = kube.core.list_namespaced_pod(
            rel.namespace, label_selector=_selector(dep.spec.selector.match_labels)
        ).items
        live = [p for p in pods if p.metadata.deletion_timestamp is None]
        # every pod of it on the new image, one per replica (a probe fleet has several)
        images = [p.spec.containers[0].image.endswith(":upgrade-test") for p in live]
        assert images == [True] * dep.spec.replicas, (dep.metadata.name, images)
    for doc in rel.of_kind("SparkApplication"):
        app = kube.get(doc["apiVersion"], doc["kind"], doc["metadata"]["name"], rel.namespace)
        assert app.spec.image.endswith(":upgrade-test")
    # every PDB the upgraded chart made counts the pods it protects: the stream pod (local mode)
    # and each probe fleet's replicas (a fleet scenario has several PDBs; each is judged by name)
    docs = render(_upgrade_values(rel), namespace=rel.namespace)
    pdbs = [d for d in docs if d["kind"] == "PodDisruptionBudget"]
    if rel.values.get("stream", {}).get("mode", "local") == "local":
        assert any(d["metadata"]["name"].endswith("-stream") for d in pdbs), pdbs
    deployments = [d for d in docs if d["kind"] == "Deployment"]
    expected = {
        d["metadata"]["name"]: (n, n)
        for d in pdbs
        if (n := _replicas_selected(deployments, d["spec"]["selector"]["matchLabels"]))
    }
    policy = client.PolicyV1Api(kube.api)
    seen: list[dict[str, tuple[int, int]]] = [{}]

    def counted() -> bool:
        seen[0] = {
            b.metadata.name: (b.status.expected_pods, b.status.current_healthy)
            for b in policy.list_namespaced_pod_disruption_budget(rel.namespace).items
        }
        return seen[0] == expected

    try:
        wait_until("every PDB to count the pods it protects", counted)
    except pytest.fail.Exception:
        pytest.fail(f"the PDBs count (expected, healthy) {seen[0]}, expected {expected}")


@pytest.fixture(scope="module")
def uninstalled(
    kube: Kube, releases: dict[Path, Release], upgraded: dict[Path, BaseException | None]
) -> dict[Path, BaseException | None]:
    return _each(
        releases,
        lambda rel: kube.helm(rel.namespace).uninstall(
            RELEASE, wait="watcher", timeout=HELM_TIMEOUT_S
        ),
    )


@pytest.mark.parametrize("scenario", SCENARIOS, ids=ids)
def test_uninstall_leaves_nothing_behind(
    kube: Kube,
    releases: dict[Path, Release],
    uninstalled: dict[Path, BaseException | None],
    scenario: Path,
) -> None:
    rel = releases[scenario]
    if uninstalled[scenario] is not None:
        pytest.fail(f"helm uninstall {scenario.name}: {uninstalled[scenario]}")
    selector = f"app.kubernetes.io/instance={RELEASE}"
    kinds = {(d["apiVersion"], d["kind"]) for d in rel.docs} | {("v1", "Pod")}
    for api_version, kind in sorted(kinds):
        resource = kube.dynamic.resources.get(api_version=api_version, kind=kind)
        wait_until(
            f"no {kind} left in {rel.namespace}",
            lambda r=resource: not r.get(namespace=rel.namespace, label_selector=selector).items,
        )
    # Helm's own release record is gone too (no keep_history)
    secrets = kube.core.list_namespaced_secret(rel.namespace, label_selector="owner=helm").items
    assert secrets == []
