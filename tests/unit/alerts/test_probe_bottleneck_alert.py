"""NinesProbeBottleneck, proven by ``promtool test rules``: it fires when the probe lags its
schedule while it pauses or its cgroup is CPU-throttled, and stays silent when the lag is the
broker's (a slow broker fills the producer queue, the probe itself is fine)."""

from __future__ import annotations

from typing import Any

import pytest
from alerts_helpers import RunTests, expected, series

from core.sla import SlaConfig
from monitor.alerts.rules import (
    PROBE_BOTTLENECK_HICCUP_S,
    PROBE_SEND_LAG_P999_S,
    PROBE_THROTTLED_RATIO,
    render_rules,
)

ALERT = "NinesProbeBottleneck"
MINUTES = 20
#: CFS periods of 100 ms: 600 a minute.
PERIODS = f"0+600x{MINUTES}"


@pytest.fixture(scope="module")
def rules(example_sla: SlaConfig) -> dict[str, Any]:
    return render_rules(example_sla)


def send_lag(cluster: str, values: str) -> dict[str, str]:
    """The stream's held peak of the send lag's p99.9 (topic merge, finest window)."""
    labels = {"cluster": cluster, "topic": "t", "partition": "all", "kind": "send_lag"}
    return series("nines_latency_peak_quantile_seconds", {**labels, "window": "10s", "q": "0.999"},
                  values)  # fmt: skip


def hiccup(cluster: str, values: str) -> dict[str, str]:
    """The stream's held peak of the probe's pauses (finest window)."""
    labels = {"cluster": cluster, "topic": "t", "partition": "all", "kind": "hiccup"}
    return series("nines_latency_peak_seconds", {**labels, "window": "10s"}, values)


def cgroup(cluster: str, throttled_per_minute: int) -> list[dict[str, str]]:
    """The probe's own cgroup counters, as its /metrics exports them."""
    where = {"cluster": cluster, "job": "nines-probe", "instance": f"{cluster}:9465"}
    return [
        series("nines_probe_cgroup_cpu_periods_total", where, PERIODS),
        series(
            "nines_probe_cgroup_cpu_throttled_periods_total",
            where,
            f"0+{throttled_per_minute}x{MINUTES}",
        ),
    ]


def case(input_series: list[dict[str, str]], *tests: dict[str, Any]) -> dict[str, Any]:
    return {"interval": "1m", "input_series": input_series, "alert_rule_test": list(tests)}


def at(eval_time: str, alerts: list[dict[str, Any]]) -> dict[str, Any]:
    return {"eval_time": eval_time, "alertname": ALERT, "exp_alerts": alerts}


def test_thresholds_are_what_the_docs_say() -> None:
    assert (PROBE_SEND_LAG_P999_S, PROBE_BOTTLENECK_HICCUP_S, PROBE_THROTTLED_RATIO) == (
        0.01,
        0.01,
        0.25,
    )


def test_fires_when_the_probe_is_throttled_or_paused_not_when_the_broker_is_slow(
    rules: dict[str, Any], run_rule_tests: RunTests
) -> None:
    fires = {c: expected(rules, ALERT, {"cluster": c}, "80ms") for c in ("c1", "c2")}
    lagging = f"0.0008x2 0.08x{MINUTES - 3}"  # send lag p99.9 from 0.8 ms to 80 ms at minute 3
    run_rule_tests(
        rules,
        [
            # c1: throttled in half its periods (its CPU limit), pauses short: fires after 2m
            # c2: pauses of 0.3 s (a starved host, no cgroup counters at all): fires too
            # c3: a slow broker: the same send lag, no pause, no throttling: never
            # c4: throttled in 10 % of periods (under 25 %), short pauses, lagging: never
            # c5: throttled in half its periods but on schedule: never
            case(
                [
                    send_lag("c1", lagging),
                    hiccup("c1", f"0.002x{MINUTES}"),
                    *cgroup("c1", 300),
                    send_lag("c2", lagging),
                    hiccup("c2", f"0.002x2 0.3x{MINUTES - 3}"),
                    send_lag("c3", lagging),
                    hiccup("c3", f"0.002x{MINUTES}"),
                    *cgroup("c3", 0),
                    send_lag("c4", lagging),
                    hiccup("c4", f"0.002x{MINUTES}"),
                    *cgroup("c4", 60),
                    send_lag("c5", f"0.0008x{MINUTES}"),
                    hiccup("c5", f"0.002x{MINUTES}"),
                    *cgroup("c5", 300),
                ],
                at("2m", []),
                at("4m", []),  # pending: for 2m
                at("5m", [fires["c1"], fires["c2"]]),
                at("15m", [fires["c1"], fires["c2"]]),
            )
        ],
    )


def test_resolves_when_the_throttling_stops(
    rules: dict[str, Any], run_rule_tests: RunTests
) -> None:
    where = {"cluster": "c1", "job": "nines-probe", "instance": "c1:9465"}
    run_rule_tests(
        rules,
        [
            case(
                [
                    send_lag("c1", f"0.08x{MINUTES}"),
                    hiccup("c1", f"0.002x{MINUTES}"),
                    series("nines_probe_cgroup_cpu_periods_total", where, PERIODS),
                    # throttled half the time for 6 minutes, then never again
                    series(
                        "nines_probe_cgroup_cpu_throttled_periods_total",
                        where,
                        f"0+300x6 1800x{MINUTES - 6}",
                    ),
                ],
                at("5m", [expected(rules, ALERT, {"cluster": "c1"}, "80ms")]),
                # resolved once the throttled share over 5m is under 25 % again
                at("12m", []),
            )
        ],
    )
