"""Quantile tables of closed windows, as the demo shows them: one row per series, gated nines."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC
from typing import TYPE_CHECKING, Any

from core.hdr import REPORTED_QUANTILES, min_samples_for, quantile_label
from core.printable import printable
from core.units import parse_duration_s
from core.windows import WindowHistogram

if TYPE_CHECKING:
    from core.sla import SlaConfig

#: Quantiles of the live table (labelled as everywhere else: p99.9 for 0.999).
TABLE_QUANTILES = (0.5, 0.99, 0.999, 0.9999, 0.99999)
#: A probe pause longer than this in a window makes that window's tail the probe's (or the
#: machine's), not the broker's: the same guard as the example SLA's ``probe_hiccup_max``.
HICCUP_SUSPECT_S = 0.05


def quantile_table(windows: Iterable[WindowHistogram]) -> list[dict[str, Any]]:
    """Per series: samples, gated quantiles (seconds, None when too few samples), max, lost."""
    rows = []
    for w in sorted(
        windows,
        key=lambda w: (
            w.series.cluster,
            w.series.topic,
            w.series.partition,
            w.series.kind,
            w.window_start_us,
        ),
    ):
        total = w.hist.total
        row: dict[str, Any] = {
            "cluster": w.series.cluster,
            "topic": w.series.topic,
            "partition": w.series.partition,
            "kind": w.series.kind,
            "window": w.resolution,
            "samples": total,
            "max": w.hist.max_us / 1e6,
            "lost": w.lost,
        }
        for q in REPORTED_QUANTILES:
            gated = total >= min_samples_for(q)
            row[quantile_label(q)] = w.hist.value_at_quantile(q) / 1e6 if gated else None
        rows.append(row)
    return rows


def probe_hiccup_s(windows: list[WindowHistogram]) -> dict[str, float]:
    """Cluster → the probe's longest own pause (seconds) in these windows."""
    out: dict[str, float] = {}
    for w in windows:
        if w.series.kind == "hiccup" and w.hist.total:
            out[w.series.cluster] = max(out.get(w.series.cluster, 0.0), w.hist.max_us / 1e6)
    return out


def attribution(hiccup_s: float | None, tail_s: float) -> str:
    """Whose spike it is, at a glance: the probe's own pauses against the tail it measured."""
    if hiccup_s is None:
        return "probe pauses: no data"
    verdict = (
        "the probe/machine stalled: its tail here is not the broker's"
        if hiccup_s > HICCUP_SUSPECT_S and hiccup_s >= tail_s / 2
        else "the tail is the broker's"
    )
    return f"probe's longest own pause {hiccup_s * 1e3:.1f} ms: {verdict}"


def render_tables(
    latest: Mapping[str, list[WindowHistogram]], sla: SlaConfig | None = None
) -> object:
    """A rich renderable: one table per resolution for its latest closed window, then the SLA.

    Each table carries the probe's own longest pause (its hiccup) beside the latency, so a spike
    reads at once as the probe's or machine's (a pause as long as the tail) or the broker's.
    """
    from datetime import datetime

    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    labels = [quantile_label(q) for q in TABLE_QUANTILES]
    tables = []
    for res, windows in sorted(latest.items(), key=lambda kv: parse_duration_s(kv[0])):
        if not windows:
            continue
        end = max(w.window_end_us for w in windows)
        when = datetime.fromtimestamp(end / 1e6, tz=UTC).strftime("%H:%M:%S")
        hiccups = probe_hiccup_s(windows)
        rows = quantile_table([w for w in windows if w.series.kind == "e2e"])
        tail_s = max((r["max"] for r in rows), default=0.0)
        caption = "; ".join(
            f"{printable(cluster)}: {attribution(hiccups.get(cluster), tail_s)}"
            for cluster in sorted({r["cluster"] for r in rows})
        )
        t = Table(
            title=f"latest closed {res} window (ended {when} UTC) — end-to-end latency, ms",
            caption=Text(caption) if caption else None,
        )
        for col in ("topic", "partition", "samples", *labels, "max", "lost", "probe pause"):
            t.add_column(col, justify="left" if col == "topic" else "right")
        for row in rows:
            cells: list[Any] = [Text(printable(row["topic"])), Text(printable(row["partition"]))]
            cells.append(str(row["samples"]))
            for label in labels:
                v = row.get(label)
                cells.append("—" if v is None else f"{v * 1e3:.3f}")
            pause = hiccups.get(row["cluster"])
            cells += [
                f"{row['max'] * 1e3:.3f}",
                str(row["lost"]),
                "—" if pause is None else f"{pause * 1e3:.3f}",
            ]
            t.add_row(*cells)
        tables.append(t)
    if sla is not None:
        t = Table(title="SLA objectives — worst series in the latest closed window")
        for col in ("objective", "name", "worst, ms", "state"):
            t.add_column(col, justify="right" if col == "worst, ms" else "left")
        from monitor.slo import live_status

        for status in live_status(sla, latest):
            worst = "—" if status["worst"] is None else f"{status['worst'] * 1e3:.3f}"
            names = (Text(printable(status["objective"])), Text(printable(status["name"])))
            t.add_row(*names, worst, status["state"])
        tables.append(t)
    return Group(*tables)
