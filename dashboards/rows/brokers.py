"""Latency by broker: each message counted on the broker that led its partition when it was sent."""

from dashboards.common import TOPIC, count_timeseries, latency_timeseries

ROW = "By broker"


def panels() -> list[object]:
    """Per-broker tails (merged histograms of the partitions each led) and who leads what."""
    broker = f'{TOPIC}, kind="e2e", window="$window"'
    return [
        latency_timeseries(
            "End-to-end high nines and max by broker ($window windows)",
            [
                (
                    f'nines_broker_latency_seconds{{{broker}, q=~"0.99|0.999|0.9999"}}',
                    "{{topic}} broker {{broker}} p{{q}}",
                ),
                (
                    f"nines_broker_latency_max_seconds{{{broker}}}",
                    "{{topic}} broker {{broker}} max",
                ),
            ],
            "Each broker's closed-window histogram merges the messages it led at send time, "
            "whichever partition they were on: when leadership moves, a slow broker's tail "
            "moves with it here, while the partition series mix brokers.",
            width=24,
        ),
        count_timeseries(
            "Lost messages by broker ($window windows)",
            [
                (
                    f"nines_broker_latency_window_lost{{{broker}}}",
                    "{{topic}} broker {{broker}} lost",
                ),
                (
                    f"nines_broker_latency_window_samples{{{broker}}}",
                    "{{topic}} broker {{broker}} samples",
                ),
            ],
            "Lost probe messages of each broker's latest closed window, beside its samples "
            "(lost ones included): a broker that loses messages shows here first.",
            width=12,
        ),
        count_timeseries(
            "Partition leaders (probe's view)",
            [
                (
                    f"nines_probe_partition_leader{{{TOPIC}}}",
                    "{{topic}}/{{partition}}",
                )
            ],
            "Broker id leading each probed partition: a step is a leader move.",
            width=12,
        ),
    ]
