"""Publish latency and the probe's own send lag, from the same closed windows."""

from dashboards.common import SERIES, latency_timeseries

ROW = "Publish latency and send lag"


def panels() -> list[object]:
    """Intended-send-to-ack latency, and how late the probe itself sent."""
    return [
        latency_timeseries(
            f"{title} ($window windows)",
            [
                (
                    f'nines_latency_seconds{{{SERIES}, kind="{kind}", window="$window", '
                    f'q=~"0.99|0.999|0.9999"}}',
                    "{{partition}} p{{q}}",
                ),
                (
                    f'nines_latency_max_seconds{{{SERIES}, kind="{kind}", window="$window"}}',
                    "{{partition}} max",
                ),
            ],
            description,
        )
        for kind, title, description in (
            ("publish", "Publish latency", "From the intended send time to the broker's ack."),
            (
                "send_lag",
                "Probe send lag",
                "How far the probe fell behind its schedule; large values with a healthy broker "
                "point at the probe host.",
            ),
        )
    ]
