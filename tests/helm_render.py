"""The chart rendered offline with helm-python-sdk (Helm's own engine), one list of manifests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import helm_python as helm
import yaml

ROOT = Path(__file__).resolve().parents[1]
CHART = ROOT / "helm" / "nines"
SCENARIOS = sorted((CHART / "ci").glob("*.yaml"))


def values_of(scenario: Path) -> dict[str, Any]:
    """A scenario's values, parsed as ``helm -f`` parses them (Go YAML)."""
    values: dict[str, Any] = helm.values_from_yaml(scenario.read_text()) or {}
    return values


def render(
    values: dict[str, Any], name: str = "nines", namespace: str = "monitoring"
) -> list[dict[str, Any]]:
    """Every manifest the chart renders for ``values`` (NOTES.txt left out)."""
    chart = helm.Chart.load(str(CHART))
    chart.validate_schema(values)
    docs: list[dict[str, Any]] = []
    for file, text in chart.render(values, name=name, namespace=namespace).items():
        if not file.endswith("NOTES.txt"):
            docs.extend(d for d in yaml.safe_load_all(text) if d)
    return docs


def nulls(node: object, path: str = "") -> Iterator[str]:
    """The path of every null in a manifest: the API server rejects a null where a list or
    map belongs (server-side apply does; client-side apply and dry runs drop it)."""
    if node is None:
        yield path or "."
    elif isinstance(node, dict):
        for key, value in node.items():
            yield from nulls(value, f"{path}.{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from nulls(value, f"{path}[{i}]")
