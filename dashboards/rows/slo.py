"""SLO view over the dashboard's time range, computed from merged histogram buckets."""

from dashboards.common import TOPIC, count_timeseries, latency_timeseries

ROW = "SLO over the time range (histogram buckets)"
BUCKETS = f'nines_latency_classic_seconds_bucket{{{TOPIC}, kind="e2e"}}'
#: The same samples as a native histogram: empty unless Prometheus ingests native histograms
#: (2.x: ``--enable-feature=native-histograms``; 3.x: ``scrape_native_histograms: true``).
NATIVE = f'nines_latency_native_seconds{{{TOPIC}, kind="e2e"}}'
NATIVE_NOTE = (
    " Needs a Prometheus that ingests native histograms (2.x with "
    "--enable-feature=native-histograms, 3.x with scrape_native_histograms: true); empty otherwise."
)


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
        latency_timeseries(
            "End-to-end quantiles over the range (native histogram)",
            [
                (f"histogram_quantile({q}, sum(increase({NATIVE}[$__range])))", f"p{label}")
                for q, label in (("0.99", "99"), ("0.999", "99.9"), ("0.9999", "99.99"))
            ],
            "The HDR histograms re-binned to native buckets (schema 8, 0.27 % wide, coarser "
            "only for a series over 160 buckets), merged in PromQL: the quantile of any range and "
            "any set of topics within a bucket's width, not a 1-2.5-5 step." + NATIVE_NOTE,
        ),
        count_timeseries(
            "Share of messages under 50 ms (native histogram)",
            [
                (
                    f"histogram_fraction(0, 0.05, sum(increase({NATIVE}[$__range])))",
                    "under 50 ms",
                )
            ],
            "The burn-rate SLI from the native histogram: any threshold, not only an le bound "
            "(interpolated inside the bucket holding it)." + NATIVE_NOTE,
            unit="percentunit",
            width=12,
        ),
    ]
