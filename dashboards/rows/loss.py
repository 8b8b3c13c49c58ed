"""Loss and data quality: lost, late, malformed and vanished echoes, never silently dropped."""

from dashboards.common import TOPIC, count_timeseries

ROW = "Loss and data quality"


def panels() -> list[object]:
    """Counters as increases per interval (summing counts is fine; summing quantiles is not)."""
    return [
        count_timeseries(
            "Lost probe messages",
            [
                (
                    f"sum by (cluster, topic) (increase(nines_lost_total{{{TOPIC}}}[$__rate_interval]))",
                    "{{topic}} lost",
                ),
                (
                    f"sum by (cluster, topic) (increase(nines_echoes_total{{{TOPIC}}}[$__rate_interval]))",
                    "{{topic}} echoes",
                ),
            ],
            "Messages not received within the loss timeout; they enter the tail at the timeout.",
        ),
        count_timeseries(
            "Late and malformed echoes",
            [
                (
                    f"sum by (topic) (increase(nines_late_echoes_total{{{TOPIC}}}[$__rate_interval])) "
                    "or vector(0)",
                    "late {{topic}}",
                ),
                (
                    "sum by (reason) (increase(nines_bad_echoes_total[$__rate_interval]))",
                    "bad: {{reason}}",
                ),
            ],
            "Late echoes arrived behind the watermark (counted, in no window); bad ones failed "
            "schema v1 validation.",
        ),
        count_timeseries(
            "Echo offsets lost to retention or reset; probe echo drops",
            [
                (
                    "sum(increase(nines_data_loss_offsets_total[$__rate_interval])) or vector(0)",
                    "echo offsets vanished",
                ),
                (
                    "sum(increase(nines_offsets_reset_total[$__rate_interval])) or vector(0)",
                    "echo topic offsets went back",
                ),
                (
                    "sum(increase(nines_probe_echo_dropped_total[$__rate_interval])) or vector(0)",
                    "echoes dropped by probes",
                ),
            ],
            "Data that could not be measured; absent series mean none happened.",
        ),
    ]
