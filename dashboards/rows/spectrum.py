"""The percentile spectrum of the latest closed windows: the distribution's shape at a glance."""

from dashboards.common import SERIES, spectrum

ROW = "Percentile spectrum"


def panels() -> list[object]:
    """p50 … p99.9999 of the latest 1m and 1h windows (only the nines the samples support)."""
    return [
        spectrum(
            f"Latest {res} window: p50 … p99.9999",
            (
                f'nines_latency_seconds{{{SERIES}, kind="e2e", window="{res}"}}',
                "{{partition}} p{{q}}",
            ),
            f"Quantiles of the latest closed {res} window, from its merged HDR histogram.",
        )
        for res in ("1m", "1h")
    ]
