"""Assemble the dashboards from their rows."""

from __future__ import annotations

import json
from typing import Any

from grafana_foundation_sdk.builders import dashboard as dash
from grafana_foundation_sdk.cog.encoder import JSONEncoder

from dashboards.common import variables
from dashboards.rows import (
    brokers,
    hiccups,
    loss,
    pipeline,
    probe_cost,
    publish,
    slo,
    spectrum,
    tail,
)

LATENCY_ROWS = (tail, brokers, spectrum, publish, slo)
HEALTH_ROWS = (loss, hiccups, probe_cost, pipeline)


def _dashboard(uid: str, title: str, description: str, rows: tuple[Any, ...]) -> dict[str, Any]:
    d = (
        dash.Dashboard(title)
        .uid(uid)
        .description(description)
        .tags(["nines", "latency"])
        .refresh("30s")
        .time("now-1h", "now")
        .timezone("browser")
    )
    for v in variables():
        d = d.with_variable(v)  # type: ignore[arg-type]
    for row in rows:
        d = d.with_row(dash.Row(row.ROW))
        for panel in row.panels():
            d = d.with_panel(panel)
    built = json.loads(json.dumps(d.build(), cls=JSONEncoder))
    return dict(built)


def build_all() -> dict[str, dict[str, Any]]:
    """uid → dashboard JSON."""
    return {
        "nines-latency": _dashboard(
            "nines-latency",
            "nines — broker latency",
            "High nines and the max, measured from the intended send time. No quantile here is "
            "averaged: per-window quantiles come from full HDR histograms; anything aggregated "
            "over series or time is merged from histogram buckets.",
            LATENCY_ROWS,
        ),
        "nines-health": _dashboard(
            "nines-health",
            "nines — loss, probes and pipeline",
            "Lost, late and malformed data (counted, never dropped silently), probe pauses, and "
            "the Spark job's health.",
            HEALTH_ROWS,
        ),
    }
