"""The high nines and the max over time: the tail, per series, never averaged."""

from dashboards.common import SERIES, latency_timeseries

ROW = "Tail: high nines and max"


def panels() -> list[object]:
    """End-to-end quantiles and max of each closed window at the chosen resolution."""
    return [
        latency_timeseries(
            "End-to-end high nines and max ($window windows)",
            [
                (
                    f'nines_latency_seconds{{{SERIES}, kind="e2e", window="$window", '
                    f'q=~"0.99|0.999|0.9999|0.99999|0.999999"}}',
                    "{{topic}}/{{partition}} p{{q}}",
                ),
                (
                    f'nines_latency_max_seconds{{{SERIES}, kind="e2e", window="$window"}}',
                    "{{topic}}/{{partition}} max",
                ),
                (
                    f'nines_latency_peak_seconds{{{SERIES}, kind="e2e", window="$window"}}',
                    "{{topic}}/{{partition}} max, held",
                ),
            ],
            "Each point is one closed window's quantile, read from its full HDR histogram; a "
            "quantile appears only when the window holds at least 1/(1-q) samples. The max is "
            "exact. Measured from the intended send time (no coordinated omission). The held max "
            "(partition all) keeps every window's max for the stream's peak_hold, so a window "
            "that closed between two scrapes still shows.",
            width=24,
        ),
        latency_timeseries(
            "End-to-end median and p90 ($window windows)",
            [
                (
                    f'nines_latency_seconds{{{SERIES}, kind="e2e", window="$window", '
                    f'q=~"0.5|0.9"}}',
                    "{{topic}}/{{partition}} p{{q}}",
                )
            ],
            "The body of the distribution, for contrast with the tail above.",
        ),
        latency_timeseries(
            "Max by broker partition (1m windows)",
            [
                (
                    'max by (partition) (nines_latency_max_seconds{cluster=~"$cluster", '
                    'topic=~"$topic", kind="e2e", window="1m"})',
                    "partition {{partition}}",
                )
            ],
            "Per-partition max: each broker leads partitions, so a slow broker stands out here.",
        ),
    ]
