"""SLO view over the dashboard's time range, computed from merged histogram buckets."""

from dashboards.common import TOPIC, count_timeseries, latency_timeseries

ROW = "SLO over the time range (histogram buckets)"
BUCKETS = f'nines_latency_classic_seconds_bucket{{{TOPIC}, kind="e2e"}}'


def panels() -> list[object]:
    """Quantiles of the whole range by merging buckets (sum by le), and the share under 50 ms."""
    return [
        latency_timeseries(
            "End-to-end quantiles over the range (merged buckets)",
            [
                (
                    f"histogram_quantile({q}, sum by (le) (increase({BUCKETS}[$__range])))",
                    f"p{label}",
                )
                for q, label in (("0.99", "99"), ("0.999", "99.9"), ("0.9999", "99.99"))
            ],
            "Bucket counts of every partition and window added up, then the quantile read: "
            "the honest way to aggregate latency across series and time in PromQL (bucket "
            "resolution: 1-2.5-5 steps).",
        ),
        count_timeseries(
            "Share of messages under 50 ms",
            [
                (
                    f'sum(increase(nines_latency_classic_seconds_bucket{{{TOPIC}, kind="e2e", '
                    f'le="0.05"}}[$__range])) / sum(increase(nines_latency_classic_seconds_count'
                    f'{{{TOPIC}, kind="e2e"}}[$__range]))',
                    "under 50 ms",
                )
            ],
            "The SLI behind the burn-rate alerts.",
            unit="percentunit",
            width=12,
        ),
    ]
