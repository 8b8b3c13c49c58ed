"""Grafana dashboards as code (grafana-foundation-sdk); generated JSON lives in dashboards/json/."""

from __future__ import annotations

import json
import re
from typing import Any

from dashboards.build import build_all

__all__ = ["build_all", "queries", "substitute", "to_json"]


def to_json(dashboard: dict[str, Any]) -> str:
    """Stable JSON text, as committed."""
    return json.dumps(dashboard, indent=2, sort_keys=True) + "\n"


def queries(dashboard: dict[str, Any]) -> list[str]:
    """Every panel target's PromQL."""
    out: list[str] = []

    def walk(panels: list[dict[str, Any]]) -> None:
        for p in panels:
            walk(p.get("panels", []))
            out.extend(t["expr"] for t in p.get("targets", []) if t.get("expr"))

    walk(dashboard.get("panels", []))
    return out


def substitute(expr: str, variables: dict[str, str]) -> str:
    """Replace Grafana variables ($var, ${var}, $__range …) with concrete values."""

    def repl(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(2)
        return variables.get(name, m.group(0))

    return re.sub(r"\$\{(\w+)\}|\$(\w+)", repl, expr)
