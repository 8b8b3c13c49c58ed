"""Dashboards: committed JSON is fresh, and no panel averages a quantile."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import dashboards

ROOT = Path(__file__).parents[3]
QUANTILE_SERIES = (
    "nines_latency_seconds",
    "nines_latency_max_seconds",
    "nines_broker_latency_seconds",
    "nines_broker_latency_max_seconds",
)
FORBIDDEN = (
    r"\bavg\s*(by|without)?\s*\(",
    r"\bavg_over_time\b",
    r"\bquantile_over_time\b",
    r"\bquantile\s*\(",
    r"\bstddev",
)


def averaging_problems(expr: str) -> list[str]:
    """Why ``expr`` would average or otherwise combine quantiles (empty when it is honest)."""
    problems = [f"uses {pat}" for pat in FORBIDDEN if re.search(pat, expr)]
    for agg in re.finditer(
        r"\b(sum|avg|count|min|max|rate|increase|irate|delta)\s*"
        r"(?:(?:by|without)\s*\([^)]*\)\s*)?\(",
        expr,
    ):
        op = agg.group(1)
        depth, i = 1, agg.end()
        while i < len(expr) and depth:
            depth += {"(": 1, ")": -1}.get(expr[i], 0)
            i += 1
        inner = expr[agg.end() : i]
        if op not in ("max", "min") and any(
            s + "{" in inner or inner.strip() == s for s in QUANTILE_SERIES
        ):
            problems.append(f"{op}() over a quantile series")
    return problems


@pytest.mark.parametrize(
    "bad",
    [
        'avg(nines_latency_seconds{q="0.99"})',
        'avg_over_time(nines_latency_seconds{q="0.999"}[1h])',
        'sum by (topic) (nines_latency_seconds{q="0.99"})',
        "quantile_over_time(0.99, nines_latency_max_seconds[5m])",
        'rate(nines_latency_max_seconds{window="1m"}[5m])',
        'sum by (cluster) (nines_broker_latency_seconds{q="0.999"})',
    ],
)
def test_checker_catches_averaged_quantiles(bad: str) -> None:
    assert averaging_problems(bad)


@pytest.mark.parametrize(
    "good",
    [
        'max by (partition) (nines_latency_max_seconds{window="1m"})',
        "histogram_quantile(0.999, sum by (le) (increase(nines_latency_classic_seconds_bucket[1h])))",  # noqa: E501
        "sum(increase(nines_lost_total[5m]))",
    ],
)
def test_checker_accepts_honest_queries(good: str) -> None:
    assert not averaging_problems(good)


def all_queries() -> list[tuple[str, str]]:
    return [(uid, q) for uid, d in dashboards.build_all().items() for q in dashboards.queries(d)]


def test_no_panel_averages_a_quantile() -> None:
    found = all_queries()
    assert len(found) > 20
    bad = {q: averaging_problems(q) for _, q in found if averaging_problems(q)}
    assert not bad, bad


def test_every_metric_is_documented() -> None:
    documented = set(re.findall(r"`(nines_[a-z0-9_]+)`", (ROOT / "docs/metrics.md").read_text()))
    for _, q in all_queries():
        for metric in re.findall(r"\b(nines_[a-z0-9_]+)", q):
            base = re.sub(r"_(bucket|count|sum)$", "", metric)
            assert metric in documented or base in documented, metric


def test_committed_json_is_fresh() -> None:
    for uid, dash in dashboards.build_all().items():
        path = ROOT / "dashboards" / "json" / f"{uid}.json"
        assert path.exists() and path.read_text() == dashboards.to_json(dash), (
            f"{path} is stale: run `make dashboards`"
        )
        assert json.loads(path.read_text())["uid"] == uid


def test_substitute_fills_variables() -> None:
    expr = 'x{a=~"$cluster", w="${window}"}[$__range]'
    assert dashboards.substitute(expr, {"cluster": "c", "window": "10s", "__range": "5m"}) == (
        'x{a=~"c", w="10s"}[5m]'
    )
