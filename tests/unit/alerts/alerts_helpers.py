"""Pure helpers for the alert tests: promtool input series and expected alerts."""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE_SLA = ROOT / "examples" / "sla.yaml"
PROMTOOL = shutil.which("promtool")

_LABEL = re.compile(r"\{\{ \$labels\.(\w+) \}\}")
_VALUE = re.compile(r"\{\{ \$value(?: \| \w+)? \}\}")

#: ``run_rule_tests(rules, tests, evaluation_interval="1m") -> promtool stdout``
RunTests = Callable[..., str]


def series(metric: str, labels: Mapping[str, str], values: str) -> dict[str, str]:
    """One promtool input series in its expanding notation."""
    inner = ", ".join(f'{k}="{v}"' for k, v in labels.items())
    return {"series": f"{metric}{{{inner}}}", "values": values}


def expected(
    rules: Mapping[str, Any],
    alertname: str,
    labels: Mapping[str, str],
    value: str,
    slo: str | None = None,
) -> dict[str, Any]:
    """The alert promtool must see: the rule's labels plus ``labels``, templates filled in.

    ``value`` is the humanized ``$value`` the test expects (e.g. ``80ms``, ``2%``), so the
    annotation check asserts what Prometheus's own template engine renders.
    """
    matches = [
        rule
        for group in rules["groups"]
        for rule in group["rules"]
        if rule.get("alert") == alertname and (slo is None or rule["labels"].get("slo") == slo)
    ]
    assert len(matches) == 1, f"{alertname} (slo={slo}) matches {len(matches)} rules"
    rule = matches[0]
    annotations = {
        key: _VALUE.sub(value, _LABEL.sub(lambda m: labels[m.group(1)], text))
        for key, text in rule["annotations"].items()
    }
    return {"exp_labels": {**rule["labels"], **labels}, "exp_annotations": annotations}
