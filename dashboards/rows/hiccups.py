"""The probe's own pauses: tells a probe stall from a broker stall."""

from dashboards.common import latency_timeseries

ROW = "Probe hiccups"


def panels() -> list[object]:
    """Longest probe pause per window, and per probe process."""
    return [
        latency_timeseries(
            "Probe pauses ($window windows)",
            [
                (
                    'nines_latency_max_seconds{cluster=~"$cluster", kind="hiccup", window="$window"}',
                    "{{cluster}} max pause",
                )
            ],
            "jHiccup-style: the longest time the probe's 1 ms timer overslept. A window with a "
            "big probe pause is not evidence against the broker.",
        ),
        latency_timeseries(
            "Probe pause, last interval",
            [
                (
                    'max by (cluster) (nines_probe_hiccup_max_seconds{cluster=~"$cluster"})',
                    "{{cluster}}",
                )
            ],
            "Reported by each probe's own /metrics.",
        ),
    ]
