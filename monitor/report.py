"""``nines report`` and ``nines slo``: distributions and SLO attainment from the histogram archive.

Both merge archived histograms (add bucket counts) over the requested span and only then read
quantiles; a month's SLO is computed from a month's merged histogram, never from averages.
"""

from __future__ import annotations

import argparse
import base64
import json
import math
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from core.config import ConfigError
from core.hdr import SparseHistogram
from core.units import parse_duration_s
from core.windows import ALL_PARTITIONS, WindowHistogram, WindowSpec, merge_all

#: Percentiles on the x axis: 0 % then 90 %, 99 % … 99.9999 % (1/(1-p) log scale).
CURVE_PERCENTILES: tuple[float, ...] = tuple(
    sorted({0.0} | {1 - 10 ** (-k / 8) for k in range(1, 8 * 6 + 1)})
)
TICKS: tuple[tuple[float, str], ...] = (
    (0.0, "0%"), (0.9, "90%"), (0.99, "99%"), (0.999, "99.9%"), (0.9999, "99.99%"),
    (0.99999, "99.999%"), (0.999999, "99.9999%"),
)  # fmt: skip

REPORT_EXAMPLES = """examples:
  nines report --archive /data/archive --out latency.png
  nines report --archive /data/archive --from 2026-11-22T10:00 --to 2026-11-22T11:00 --kind e2e --out hour.html
  nines report --archive /data/archive --by window --resolution 1m --out minutes.png
  nines report --archive /data/archive --topic nines.probe --partition 0 --out p0.png --hlog p0.hlog
"""  # noqa: E501

SLO_EXAMPLES = """examples:
  nines slo --archive /data/archive --sla examples/sla.yaml               # the last 30 days
  nines slo --archive /data/archive --sla examples/sla.yaml --since 7d
  nines slo --archive /data/archive --sla examples/sla.yaml --since 1h --resolution 1m
"""


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add the ``report`` and ``slo`` subcommands."""
    p = sub.add_parser(
        "report",
        help="Plot latency-by-percentile from the histogram archive.",
        description="Merges archived HDR histograms over a time span and plots latency by "
        "percentile (x: 1/(1-p) log scale up to 99.9999 %, then the max), one curve per series "
        "or per window. Writes PNG (plus the plotted points as FILE.png.json) or HTML.",
        epilog=REPORT_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _archive_args(p)
    p.add_argument("--by", choices=("series", "window"), default="series", help="one curve per")
    p.add_argument("--out", required=True, help="output file: .png or .html")
    p.add_argument("--hlog", default=None, help="also export the selected windows as a .hlog")
    p.set_defaults(func=run_report)
    s = sub.add_parser(
        "slo",
        help="SLO attainment per objective from merged archived histograms.",
        description="For each objective of an SLA file: the fraction of probe messages under the "
        "threshold, the max, or the loss ratio, over the span, from merged histograms.",
        epilog=SLO_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    s.add_argument("--archive", required=True, help="archive directory written by nines stream")
    s.add_argument("--sla", required=True, help="SLA file (see examples/sla.yaml)")
    s.add_argument("--since", default="30d", help="span ending now (default 30d)")
    s.add_argument("--resolution", default=None, help="archived resolution to read (finest)")
    s.set_defaults(func=run_slo)


def _archive_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--archive", required=True, help="archive directory written by nines stream")
    p.add_argument("--from", dest="start", default=None, help="ISO time or epoch seconds")
    p.add_argument("--to", dest="end", default=None, help="ISO time or epoch seconds")
    p.add_argument("--resolution", default=None, help="archived resolution (default: the finest)")
    p.add_argument("--cluster", default=None)
    p.add_argument("--topic", default=None)
    p.add_argument("--partition", default=None, help="a partition, or 'all' (default) to merge")
    p.add_argument("--kind", default="e2e", help="e2e (default), publish, send_lag, hiccup")


def _time_us(text: str | None, field: str) -> int | None:
    if text is None:
        return None
    from datetime import UTC, datetime

    try:
        return int(float(text) * 1e6)
    except ValueError:
        pass
    try:
        dt = datetime.fromisoformat(text)
    except ValueError:
        raise ConfigError(f"{field}: not a time: {text!r} (ISO 8601 or epoch seconds)") from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return int(dt.timestamp() * 1e6)


def finest_resolution(archive: Path) -> str:
    """The finest resolution present in an archive."""
    found = [d.name.split("=", 1)[1] for d in archive.glob("resolution=*") if d.is_dir()]
    if not found:
        raise ConfigError(f"archive: no windows under {archive}")
    return WindowSpec.from_names(found).finest


def select(
    windows: Iterable[WindowHistogram],
    cluster: str | None = None,
    topic: str | None = None,
    partition: str | None = None,
    kind: str | None = None,
) -> list[WindowHistogram]:
    """Windows matching the filters (None matches anything; partition 'all' matches all)."""
    out = []
    for w in windows:
        s = w.series
        if cluster is not None and s.cluster != cluster:
            continue
        if topic is not None and s.topic != topic:
            continue
        if partition not in (None, ALL_PARTITIONS) and s.partition != partition:
            continue
        if kind is not None and s.kind != kind:
            continue
        out.append(w)
    return out


def merge_curves(
    windows: Sequence[WindowHistogram], by: str, partition: str | None
) -> dict[str, WindowHistogram]:
    """Label → merged window: per series (partitions merged unless one is chosen) or per window."""
    groups: dict[str, list[WindowHistogram]] = {}
    for w in windows:
        s = w.series
        if by == "window":
            from datetime import UTC, datetime

            label = datetime.fromtimestamp(w.window_start_us / 1e6, tz=UTC).strftime("%H:%M:%S")
        else:
            part = s.partition if partition not in (None, ALL_PARTITIONS) else ALL_PARTITIONS
            label = f"{s.cluster}/{s.topic}/{part} {s.kind}"
        groups.setdefault(label, []).append(w)
    return {label: merge_all(ws) for label, ws in sorted(groups.items())}


def percentile_curve(hist: SparseHistogram) -> list[tuple[float, float]]:
    """(percentile, latency seconds) points up to the six nines the data supports, then the max."""
    total = hist.total
    points = []
    for p in CURVE_PERCENTILES:
        if p > 0 and 1 / (1 - p) > total:
            break
        points.append((p, hist.value_at_quantile(p) / 1e6))
    points.append((1.0, hist.max_us / 1e6))
    return points


def _x(p: float, p_max: float) -> float:
    """Position on the 1/(1-p) log axis; the max is drawn one decade past the last point."""
    return p_max if p >= 1.0 else 1 / (1 - p)


def write_plot(curves: dict[str, WindowHistogram], out: Path, title: str) -> dict[str, Any]:
    """Write the PNG (and FILE.png.json with the plotted points); return the points."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    data: dict[str, Any] = {"title": title, "curves": {}}
    fig, ax = plt.subplots(figsize=(10, 6), dpi=110)
    x_max_tick = 10.0
    for label, w in curves.items():
        pts = percentile_curve(w.hist)
        body = [pt for pt in pts if pt[0] < 1.0]
        last_x = 1 / (1 - body[-1][0]) if body else 1.0
        max_x = last_x * 10
        x_max_tick = max(x_max_tick, max_x)
        xs = [_x(p, max_x) for p, _ in pts]
        ys = [max(v, 1e-6) for _, v in pts]
        (line,) = ax.plot(xs[:-1], ys[:-1], label=f"{label} (n={w.hist.total:,})", linewidth=1.6)
        ax.scatter([xs[-1]], [ys[-1]], marker="^", s=40, color=line.get_color())
        ax.annotate(
            f"max {pts[-1][1] * 1e3:.1f} ms",
            (xs[-1], ys[-1]),
            fontsize=7,
            textcoords="offset points",
            xytext=(4, 4),
        )
        data["curves"][label] = {"samples": w.hist.total, "points": pts}
    ax.set_xscale("log")
    ax.set_yscale("log")
    ticks = [(1 / (1 - p), name) for p, name in TICKS if 1 / (1 - p) <= x_max_tick]
    ax.set_xticks([t for t, _ in ticks] + [x_max_tick], [n for _, n in ticks] + ["max"])
    ax.set_xlabel("percentile (1/(1-p) scale); ▲ = max")
    ax.set_ylabel("latency (seconds)")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)
    Path(str(out) + ".json").write_text(json.dumps(data, indent=1))
    return data


def write_html(curves: dict[str, WindowHistogram], out: Path, title: str) -> None:
    """A self-contained page: the plot inline and a quantile table per curve."""
    png = out.with_suffix(".png")
    data = write_plot(curves, png, title)
    img = base64.b64encode(png.read_bytes()).decode()
    rows = []
    for label, c in data["curves"].items():
        cells = "".join(f"<td>{v * 1e3:.3f}</td>" for _, v in c["points"])
        rows.append(f"<tr><th>{label}</th><td>{c['samples']:,}</td>{cells}</tr>")
    heads = "".join(
        f"<th>{'max' if p >= 1 else f'p{p * 100:.6g}'}</th>"
        for p, _ in next(iter(data["curves"].values()))["points"]
    )
    out.write_text(
        f"<!doctype html><meta charset=utf-8><title>{title}</title>"
        f"<h1>{title}</h1><img src='data:image/png;base64,{img}'>"
        f"<p>Latency in ms, read from merged HDR histograms.</p>"
        f"<table border=1><tr><th>series</th><th>samples</th>{heads}</tr>{''.join(rows)}</table>"
    )


def run_report(args: argparse.Namespace) -> int:
    """Merge the selected archived windows and plot them."""
    from streaming.archive import export_hlog, read_windows

    archive = Path(args.archive)
    resolution = args.resolution or finest_resolution(archive)
    start, end = _time_us(args.start, "from"), _time_us(args.end, "to")
    windows = select(
        read_windows(archive, resolution, start, end),
        args.cluster,
        args.topic,
        args.partition,
        args.kind,
    )
    if not windows:
        raise ConfigError("archive: no windows match the selection")
    curves = merge_curves(windows, args.by, args.partition)
    out = Path(args.out)
    title = f"latency by percentile — {args.kind}, {resolution} windows merged ({len(windows)})"
    if out.suffix == ".html":
        write_html(curves, out, title)
    elif out.suffix == ".png":
        write_plot(curves, out, title)
    else:
        raise ConfigError("out: must end in .png or .html")
    if args.hlog:
        export_hlog(windows, args.hlog)
    print(f"wrote {out} ({len(curves)} curves from {len(windows)} windows)")
    return 0


def attainment(objective: Any, windows: Sequence[WindowHistogram]) -> dict[str, Any]:
    """One objective's attainment over the merged windows it selects."""
    part = objective.partition
    ws = select(windows, objective.cluster, objective.topic, part, objective.kind)
    if not ws:
        return {"objective": objective.name, "samples": 0, "value": None, "met": None}
    merged = merge_all(ws)
    h = merged.hist
    row: dict[str, Any] = {"objective": objective.name, "samples": h.total}
    if objective.threshold is not None:
        good = h.count_at_or_below(int(objective.threshold * 1e6))
        ratio = good / h.total if h.total else math.nan
        target = objective.objective if objective.objective is not None else objective.quantile
        row.update(
            target=f"{target:.6g} <= {objective.threshold * 1e3:g}ms",
            value=ratio,
            met=ratio >= target,
        )
    elif objective.max is not None:
        row.update(
            target=f"max <= {objective.max:g}s",
            value=h.max_us / 1e6,
            met=h.max_us / 1e6 <= objective.max,
        )
    elif objective.loss_ratio is not None:
        ratio = merged.lost / h.total if h.total else math.nan
        row.update(
            target=f"loss <= {objective.loss_ratio:g}",
            value=ratio,
            met=ratio <= objective.loss_ratio,
        )
    else:
        row.update(target="echoes arriving", value=h.total, met=h.total > 0)
    return row


def run_slo(args: argparse.Namespace) -> int:
    """Print attainment per objective over the span."""
    from rich.console import Console
    from rich.table import Table

    from core.sla import load_sla
    from streaming.archive import read_windows

    sla = load_sla(args.sla)
    archive = Path(args.archive)
    try:
        since_s = parse_duration_s(args.since)
    except ValueError as exc:
        raise ConfigError(f"since: {exc}") from None
    resolution = args.resolution or finest_resolution(archive)
    start = int((time.time() - since_s) * 1e6)
    windows = read_windows(archive, resolution, start_us=start)
    table = Table(title=f"SLO attainment, last {args.since}, from merged {resolution} histograms")
    for col in ("objective", "target", "samples", "attained", "met"):
        table.add_column(col)
    for o in sla.objectives:
        r = attainment(o, windows)
        value = r.get("value")
        shown = (
            "—" if value is None else (f"{value:.6g}" if isinstance(value, float) else str(value))
        )
        met = {None: "no data", True: "yes", False: "NO"}[r.get("met")]
        table.add_row(o.name, str(r.get("target", "")), f"{r['samples']:,}", shown, met)
    Console(width=120).print(table)
    return 0
