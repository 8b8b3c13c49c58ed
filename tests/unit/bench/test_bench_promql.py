"""``bench.promql.histogram_quantile`` against hand-worked values and a real ``promtool``."""

from __future__ import annotations

import math
import subprocess
from pathlib import Path

import pytest
from real_components import require_tool

from bench.promql import DEFAULT_BUCKETS_S, cumulative_buckets, histogram_quantile

INF = math.inf
BASIC = [(0.1, 10.0), (0.5, 30.0), (1.0, 40.0), (INF, 40.0)]


@pytest.mark.parametrize(
    ("q", "buckets", "expected"),
    [
        (0.5, BASIC, 0.3),  # rank 20 in (0.1, 0.5]: 0.1 + 0.4 * 10/20
        (0.25, BASIC, 0.1),  # rank 10 = first bucket's count: its upper bound
        (0.1, BASIC, 0.04),  # first bucket interpolates from 0
        (1.0, BASIC, 1.0),  # everything finite: the max reads as the top occupied bound
        (0.9, [(0.1, 10.0), (1.0, 20.0), (INF, 30.0)], 1.0),  # rank in +Inf: highest finite le
        (0.5, [(1.0, 20.0), (INF, 40.0), (0.1, 10.0)], 1.0),  # unsorted: rank 20 ends (0.1, 1]
        (0.5, [(0.1, 10.0), (0.5, 8.0), (1.0, 20.0), (INF, 20.0)], 0.1),  # dip forced monotonic
        (0.5, [(-1.0, 5.0), (1.0, 10.0), (INF, 10.0)], -1.0),  # first bound <= 0 returned as is
    ],
)
def test_hand_worked_values(q: float, buckets: list[tuple[float, float]], expected: float) -> None:
    assert histogram_quantile(q, buckets) == pytest.approx(expected)


def test_edge_cases_follow_prometheus() -> None:
    assert math.isnan(histogram_quantile(0.5, [(0.1, 1.0), (1.0, 2.0)]))  # no +Inf bucket
    assert math.isnan(histogram_quantile(0.5, [(0.1, 0.0), (INF, 0.0)]))  # no observations
    assert math.isnan(histogram_quantile(0.5, [(INF, 3.0)]))  # fewer than two buckets
    assert histogram_quantile(-0.1, BASIC) == -INF
    assert histogram_quantile(1.1, BASIC) == INF
    assert math.isnan(histogram_quantile(math.nan, BASIC))


def test_cumulative_buckets_count_le_inclusive() -> None:
    buckets = cumulative_buckets([0.005, 0.006, 7.0, 11.0])
    assert buckets[0] == (0.005, 1.0)  # le is inclusive
    assert buckets[1] == (0.01, 2.0)
    assert buckets[-2] == (10.0, 3.0)
    assert buckets[-1] == (INF, 4.0)
    assert len(buckets) == len(DEFAULT_BUCKETS_S) + 1


CASES: list[tuple[list[tuple[float, float]], list[float]]] = [
    (BASIC, [0.1, 0.25, 0.5, 0.9, 0.99, 1.0]),
    ([(0.1, 10.0), (1.0, 20.0), (INF, 30.0)], [0.5, 0.9, 0.999]),
    (cumulative_buckets([0.003, 0.02, 0.02, 0.3, 0.7, 2.0, 4.0, 9.0, 12.0, 30.0]), [0.5, 0.85]),
    (cumulative_buckets([0.001 * i for i in range(1, 1001)] + [6.5]), [0.99, 0.999, 0.9995]),
]


def test_matches_real_promtool(tmp_path: Path) -> None:
    """promtool evaluates histogram_quantile on the same buckets; its values must equal ours."""
    require_tool("promtool", "Debian package 'prometheus'; make system-test-deps")
    series, tests = [], []
    for i, (buckets, qs) in enumerate(CASES):
        for le, count in buckets:
            le_s = "+Inf" if math.isinf(le) else repr(le)
            series.append(f'      - series: \'h_bucket{{case="{i}",le="{le_s}"}}\'\n')
            series.append(f"        values: '{count:g}'\n")
        for q in qs:
            mine = histogram_quantile(q, buckets)
            tests.append(
                f'      - expr: histogram_quantile({q!r}, h_bucket{{case="{i}"}})\n'
                "        eval_time: 0m\n"
                f"        exp_samples:\n          - labels: '{{case=\"{i}\"}}'\n"
                f"            value: {mine!r}\n"
            )
    (tmp_path / "rules.yml").write_text("groups: []\n")
    (tmp_path / "test.yml").write_text(
        "rule_files: [rules.yml]\nevaluation_interval: 1m\ntests:\n  - interval: 1m\n"
        "    input_series:\n" + "".join(series) + "    promql_expr_test:\n" + "".join(tests)
    )
    proc = subprocess.run(
        ["promtool", "test", "rules", "test.yml"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
