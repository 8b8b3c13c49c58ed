"""Typed panel helpers over grafana-foundation-sdk, so rows read as lists of queries."""

from __future__ import annotations

from typing import Any

from grafana_foundation_sdk.builders import bargauge, common, stat, timeseries
from grafana_foundation_sdk.builders import dashboard as dash
from grafana_foundation_sdk.builders import prometheus as prom
from grafana_foundation_sdk.models import common as cm
from grafana_foundation_sdk.models.dashboard import DataSourceRef

DATASOURCE = DataSourceRef(type_val="prometheus", uid="${datasource}")

#: Selector of one latency series from the template variables (partition "all" = the merge).
SERIES = 'cluster=~"$cluster", topic=~"$topic", partition=~"$partition"'
#: Selector for counters, which have no partition "all": they are summed by topic in PromQL.
TOPIC = 'cluster=~"$cluster", topic=~"$topic"'

Query = tuple[str, str]  # (PromQL, legend)


def _targets(queries: list[Query], instant: bool = False) -> list[Any]:
    out = []
    for i, (expr, legend) in enumerate(queries):
        q = prom.Dataquery().expr(expr).legend_format(legend).ref_id(chr(ord("A") + i))
        out.append(q.instant() if instant else q.range())
    return out


def latency_timeseries(
    title: str, queries: list[Query], description: str, width: int = 12
) -> timeseries.Panel:
    """Latency over time on a log axis (tails span decades)."""
    return (
        timeseries.Panel()
        .title(title)
        .description(description)
        .datasource(DATASOURCE)
        .targets(_targets(queries))
        .unit("s")
        .span(width)
        .height(9)
        .scale_distribution(common.ScaleDistributionConfig().type(cm.ScaleDistribution.LOG).log(10))
        .legend(
            common.VizLegendOptions()
            .display_mode(cm.LegendDisplayMode.TABLE)
            .placement(cm.LegendPlacement.BOTTOM)
            .show_legend(True)
            .calcs(["max", "last"])
        )
    )


def count_timeseries(
    title: str, queries: list[Query], description: str, unit: str = "short", width: int = 8
) -> timeseries.Panel:
    """Counts or rates over time on a linear axis."""
    return (
        timeseries.Panel()
        .title(title)
        .description(description)
        .datasource(DATASOURCE)
        .targets(_targets(queries))
        .unit(unit)
        .span(width)
        .height(8)
    )


def spectrum(title: str, query: Query, description: str, width: int = 12) -> bargauge.Panel:
    """The latest closed window's quantiles side by side: a percentile spectrum."""
    return (
        bargauge.Panel()
        .title(title)
        .description(description)
        .datasource(DATASOURCE)
        .targets(_targets([query], instant=True))
        .unit("s")
        .span(width)
        .height(8)
        .orientation(cm.VizOrientation.VERTICAL)
        .display_mode(cm.BarGaugeDisplayMode.GRADIENT)
        .reduce_options(common.ReduceDataOptions().calcs(["lastNotNull"]).values(False))
    )


def single_stat(title: str, query: Query, description: str, unit: str) -> stat.Panel:
    """One number (e.g. seconds since the last micro-batch)."""
    return (
        stat.Panel()
        .title(title)
        .description(description)
        .datasource(DATASOURCE)
        .targets(_targets([query], instant=True))
        .unit(unit)
        .span(6)
        .height(6)
    )


def variables() -> list[object]:
    """Datasource, system, cluster, topic, partition and window selectors.

    ``system`` (kafka, nats, redis, rabbitmq) narrows the clusters: one dashboard serves every
    kind of broker, and no panel needs a special case for one.
    """
    ds = dash.DatasourceVariable("datasource").label("Prometheus").type("prometheus")
    out: list[object] = [ds]
    for name, query, default in (
        ("system", "label_values(nines_system_echoes_total, system)", None),
        ("cluster", 'label_values(nines_system_echoes_total{system=~"$system"}, cluster)', None),
        ("topic", 'label_values(nines_latency_seconds{cluster=~"$cluster"}, topic)', None),
        ("partition", "label_values(nines_latency_seconds, partition)", "all"),
        ("window", "label_values(nines_latency_seconds, window)", "1m"),
    ):
        v = (
            dash.QueryVariable(name)
            .label(name)
            .query(query)
            .datasource(DATASOURCE)
            .refresh(dash_refresh_on_time_change())
        )
        if default is None:
            v = v.include_all(True).all_value(".*").multi(True)
        else:
            from grafana_foundation_sdk.models.dashboard import VariableOption

            v = v.current(VariableOption(selected=True, text=default, value=default))
        out.append(v)
    return out


def dash_refresh_on_time_change():  # type: ignore[no-untyped-def]
    """Variables refresh when the time range changes (new clusters/topics appear)."""
    from grafana_foundation_sdk.models.dashboard import VariableRefresh

    return VariableRefresh.ON_TIME_RANGE_CHANGED
