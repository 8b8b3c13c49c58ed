"""What every section of docs/benchmarks.md formats with: tables, seconds, errors, quantiles."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

Json = dict[str, Any]

QUANTILE_NAMES = {
    "0.5": "p50",
    "0.9": "p90",
    "0.99": "p99",
    "0.999": "p99.9",
    "0.9999": "p99.99",
    "0.99999": "p99.999",
    "0.999999": "p99.9999",
    "1.0": "max",
}


def qname(q: str | float) -> str:
    """``0.999`` → ``p99.9``; the max is ``max``."""
    key = str(q)
    return QUANTILE_NAMES.get(key, f"p{float(key) * 100:g}")


def fmt_seconds(x: Any) -> str:
    """A latency in the unit a human reads fastest (µs, ms or s)."""
    if isinstance(x, str):
        return x
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "n/a"
    v = float(x)
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    if abs(v) < 1e-3:
        return f"{v * 1e6:.0f} µs"
    if abs(v) < 1:
        return f"{v * 1e3:.3g} ms"
    return f"{v:.4g} s"


def fmt_error(x: Any) -> str:
    """A signed relative error as a percentage with enough digits to tell 0.01 % from 0."""
    if isinstance(x, str):
        return x
    v = float(x)
    if math.isnan(v):
        return "n/a"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    pct = v * 100
    if pct == 0:
        return "0 %"
    if abs(pct) < 0.1:
        return f"{pct:+.3f} %"
    if abs(pct) < 10:
        return f"{pct:+.2f} %"
    return f"{pct:+.0f} %"


def read_json(path: Path) -> Any:
    """A result file's JSON, or None when it is missing or unreadable (the bench has not run):
    each section's ``load`` then checks the shape it renders."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def table(header: list[str], rows: Iterable[Iterable[Any]]) -> str:
    """A GitHub markdown table."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def flatten(obj: Any, prefix: str = "") -> list[tuple[str, Any]]:
    """Dotted key/value pairs of a nested JSON object (lists of numbers shown inline)."""
    if isinstance(obj, Mapping):
        out: list[tuple[str, Any]] = []
        for k, v in obj.items():
            out += flatten(v, f"{prefix}.{k}" if prefix else str(k))
        return out
    if isinstance(obj, list) and obj and all(isinstance(x, Mapping) for x in obj):
        out = []
        for i, v in enumerate(obj):
            out += flatten(v, f"{prefix}[{i}]")
        return out
    if isinstance(obj, list) and len(obj) > 12:
        return [(prefix, f"[{len(obj)} values]")]
    return [(prefix, obj)]


def generic_table(data: Json) -> str:
    """Every measured field of a result we do not know the shape of, as a key/value table."""
    rows = [(f"`{k}`", v) for k, v in flatten({k: v for k, v in data.items() if k != "machine"})]
    return table(["field", "value"], rows)


def at_path(data: Json | None, *path: str) -> Any:
    """A nested field, or None when any step is missing."""
    cur: Any = data
    for p in path:
        if not isinstance(cur, Mapping) or p not in cur:
            return None
        cur = cur[p]
    return cur


def skip_reason(results: dict[str, Json], part: str) -> str:
    """Why the runner did not produce a part, as it recorded it."""
    status = at_path(results.get("run"), "parts", part)
    if isinstance(status, Mapping):
        return str(status.get("reason") or status.get("status"))
    return "no result file"
