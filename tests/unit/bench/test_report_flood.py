"""docs/benchmarks.md's flood section: this run's table, and the earlier tree's medians beside."""

from __future__ import annotations

from typing import Any

from bench.report_flood import section


def result(commit: str, lags: list[float]) -> dict[str, Any]:
    runs = [
        {"lag_healthy_ms": 2.0, "lag_flood_ms": lag, "cpu_healthy": 0.3, "cpu_flood": 0.5,
         "load": 1.0, "ratio": lag / 2.0}
        for lag in lags
    ]  # fmt: skip
    ratios = [r["ratio"] for r in runs]
    case = {"runs": runs, "ratio_median": sorted(ratios)[len(ratios) // 2],
            "ratio_min": min(ratios), "ratio_max": max(ratios),
            "over_target": sum(x > 2 for x in ratios)}  # fmt: skip
    return {"target_ratio": 2.0, "cases": {"plain": case}, "machine": {"git_commit": commit}}


def test_without_a_before_only_this_runs_table() -> None:
    text = section(result("bbb", [2.0, 3.0, 5.0]))
    assert "| plain | 3 | 1.50 (1.00-2.50) | 1 of 3 |" in text
    assert "Before and after" not in text


def test_a_before_result_adds_each_trees_medians() -> None:
    text = section(result("bbb", [2.0, 3.0, 5.0]), result("aaa", [4.0, 4.0, 6.0]))
    assert "the same bench on `aaa`" in text and "and on `bbb`" in text
    rows = [line for line in text.splitlines() if line.startswith("| plain | `")]
    assert rows == [
        "| plain | `aaa` | 2.00 (2.00-3.00) | 1 of 3 | 2.00 / 4.00 | 0.30 / 0.50 | 1.0 |",
        "| plain | `bbb` | 1.50 (1.00-2.50) | 1 of 3 | 2.00 / 3.00 | 0.30 / 0.50 | 1.0 |",
    ]
