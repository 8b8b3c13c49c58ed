"""The CRDs the chart's custom resources need, from the projects that own them; none committed.

- ServiceMonitor and PrometheusRule: the Prometheus Operator's own CRDs
  (``example/prometheus-operator-crd/`` of its Go module, fetched by ``go mod download`` into
  Go's module cache and checked against the checksum database).
- SparkApplication: the Spark Operator's CRD is on no registry we reach, but its API is:
  ``kubeflow-spark-api`` (PyPI) holds the operator's v1beta2 types, generated from its OpenAPI.
  ``spark_application_crd`` turns them into a structural schema: ``$ref`` inlined, and an
  optional field absent or of its type, never null (the operator's CRD marks none nullable).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from functools import cache
from importlib.metadata import version
from pathlib import Path
from typing import Any

import yaml

PROMETHEUS_OPERATOR = "github.com/prometheus-operator/prometheus-operator"
#: The newest release of the root module on the Go proxy (its CRDs: monitoring.coreos.com/v1).
PROMETHEUS_OPERATOR_VERSION = "v0.85.0"
PROMETHEUS_OPERATOR_CRDS = ("servicemonitors", "prometheusrules")
#: The Spark Operator release whose API ``kubeflow-spark-api`` ships (the package's version).
SPARK_API_PACKAGE = "kubeflow-spark-api"


#: The generator models these as objects; on the wire (and in the operator's CRD) each is an
#: integer or a string.
INT_OR_STRING = {
    "IoK8sApimachineryPkgApiResourceQuantity",
    "IoK8sApimachineryPkgUtilIntstrIntOrString",
}

POD_TEMPLATE = "IoK8sApiCoreV1PodTemplateSpec"


class CrdError(RuntimeError):
    """A CRD's source could not be had; the message says which, once."""


@cache
def prometheus_operator_crds() -> list[dict[str, Any]]:
    """The ServiceMonitor and PrometheusRule CRDs of the pinned Prometheus Operator."""
    go = shutil.which("go")
    if go is None:
        raise CrdError("the Prometheus Operator's CRDs come from its Go module: install Go")
    done = subprocess.run(
        [go, "mod", "download", "-json", f"{PROMETHEUS_OPERATOR}@{PROMETHEUS_OPERATOR_VERSION}"],
        capture_output=True, text=True, timeout=600, check=False, cwd="/",
    )  # fmt: skip
    info = json.loads(done.stdout or "{}")
    if done.returncode != 0 or "Dir" not in info:
        why = info.get("Error") or done.stderr.strip()[-300:]
        raise CrdError(
            f"go mod download {PROMETHEUS_OPERATOR}@{PROMETHEUS_OPERATOR_VERSION}: {why}"
        )
    crd_dir = Path(info["Dir"]) / "example" / "prometheus-operator-crd"
    return [
        yaml.safe_load((crd_dir / f"monitoring.coreos.com_{name}.yaml").read_text())
        for name in PROMETHEUS_OPERATOR_CRDS
    ]


def spark_operator_version() -> str:
    """The Spark Operator release the SparkApplication schema follows."""
    return "v" + version(SPARK_API_PACKAGE)


def _structural(node: dict[str, Any], defs: dict[str, Any], seen: tuple[str, ...]) -> Any:
    """One pydantic JSON-schema node as a structural OpenAPI v3 schema (descriptions dropped)."""
    if "$ref" in node:
        name = node["$ref"].rsplit("/", 1)[-1]
        if name in INT_OR_STRING:
            return {"x-kubernetes-int-or-string": True}
        if name in seen:  # no recursive type in these APIs; kept open should one appear
            return {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
        return _structural(defs[name], defs, (*seen, name))
    if "anyOf" in node:
        alternatives = [a for a in node["anyOf"] if a.get("type") != "null"]
        types = {a.get("type") for a in alternatives}
        if len(alternatives) == 1:
            return _structural(alternatives[0], defs, seen)
        if types == {"integer", "string"} or types == {"number", "string"}:
            return {"x-kubernetes-int-or-string": True}  # IntOrString, Quantity
        if types == {"integer", "number"}:
            return {"type": "number"}
        raise CrdError(f"no structural form for anyOf {sorted(map(str, types))}")
    kind = node.get("type")
    if kind is None:
        raise CrdError(f"untyped schema node: {json.dumps(node)[:200]}")
    out: dict[str, Any] = {"type": kind}
    if kind == "object":
        if "properties" in node:
            out["properties"] = {
                key: _structural(value, defs, seen) for key, value in node["properties"].items()
            }
            if node.get("required"):
                out["required"] = list(node["required"])
        extra = node.get("additionalProperties")
        if isinstance(extra, dict) and extra:
            out["additionalProperties"] = _structural(extra, defs, seen)
        elif "properties" not in node:
            out["x-kubernetes-preserve-unknown-fields"] = True
    elif kind == "array":
        out["items"] = _structural(node["items"], defs, seen)
    if "enum" in node:
        out["enum"] = list(node["enum"])
    return out


@cache
def spark_application_crd() -> dict[str, Any]:
    """The SparkApplication CRD (sparkoperator.k8s.io/v1beta2) from ``kubeflow-spark-api``."""
    try:
        from kubeflow_spark_api.models import SparkV1beta2SparkApplication
    except ImportError as exc:
        why = f"{SPARK_API_PACKAGE} not installed (pip install -e '.[dev]'): {exc}"
        raise CrdError(why) from exc
    schema = SparkV1beta2SparkApplication.model_json_schema(by_alias=True)
    defs = dict(schema.get("$defs", {}))
    # the operator's driver/executor `template` is schemaless (+kubebuilder:validation:Schemaless,
    # +kubebuilder:pruning:PreserveUnknownFields in api/v1beta2/sparkapplication_types.go)
    defs[POD_TEMPLATE] = {"type": "object"}
    root = _structural(schema, defs, ())
    root["properties"]["metadata"] = {"type": "object"}
    root["properties"]["status"] = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": "sparkapplications.sparkoperator.k8s.io",
            "annotations": {
                "nines/source": f"{SPARK_API_PACKAGE} {version(SPARK_API_PACKAGE)}",
                # *.k8s.io groups are protected; the operator's own CRD carries this approval
                "api-approved.kubernetes.io": "https://github.com/kubeflow/spark-operator/pull/1298",
            },
        },
        "spec": {
            "group": "sparkoperator.k8s.io",
            "scope": "Namespaced",
            "names": {
                "kind": "SparkApplication",
                "listKind": "SparkApplicationList",
                "plural": "sparkapplications",
                "singular": "sparkapplication",
                "shortNames": ["sparkapp"],
            },
            "versions": [
                {
                    "name": "v1beta2",
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": root},
                    "subresources": {"status": {}},
                }
            ],
        },
    }
