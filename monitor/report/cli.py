"""``nines report`` and ``nines slo``: flags, then archive → merged curves or attainment → files.

Both merge archived histograms (add bucket counts) over the requested span and only then read
quantiles; a month's SLO is computed from a month's merged histogram, never from averages.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from core.config import ConfigError
from core.units import parse_duration_s
from core.windows import WindowHistogram
from monitor.report.curves import merge_curves, select
from monitor.report.load import finest_resolution, load_windows, skipped_note, stream_windows
from runtime.disk import atomic_write
from streaming.archive_files import ArchiveError

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
    _skip_arg(s)
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
    _skip_arg(p)


def _skip_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--skip-bad",
        action="store_true",
        help="leave out archive files that cannot be read or hold inconsistent histograms, "
        "with a warning naming each and a count on the output (default: refuse, exit 2)",
    )


def check_output(path: Path, field: str) -> None:
    """Fail in one line, before any work, if ``path`` cannot be written."""
    parent = path.parent
    if path.is_dir():
        raise ConfigError(f"{field}: {path} is a directory")
    if not parent.exists():
        raise ConfigError(f"{field}: directory {parent} does not exist")
    if not parent.is_dir():
        raise ConfigError(f"{field}: {parent} is not a directory")
    try:
        with tempfile.NamedTemporaryFile(dir=parent, prefix=".nines-write-check-"):
            pass
    except OSError as exc:
        raise ConfigError(f"{field}: cannot write in {parent}: {exc.strerror or exc}") from None


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


def run_report(args: argparse.Namespace) -> int:
    """Merge the selected archived windows and plot them."""
    from monitor.report.plot import write_html, write_plot
    from streaming.archive_read import export_hlog

    out = Path(args.out)
    if out.suffix not in (".png", ".html"):
        raise ConfigError("out: must end in .png or .html")
    check_output(out, "out")
    if args.hlog:
        check_output(Path(args.hlog), "hlog")
    archive = Path(args.archive)
    resolution = args.resolution or finest_resolution(archive)
    start, end = _time_us(args.start, "from"), _time_us(args.end, "to")
    windows: list[WindowHistogram] = []
    if args.hlog:  # the .hlog holds every window, in time order
        read, bad = load_windows(archive, resolution, start, end, args.skip_bad, "report")
        windows = list(select(read, args.cluster, args.topic, args.partition, args.kind))
        curves, n = merge_curves(windows, args.by, args.partition)
    else:  # merged as read, an hour at a time: a span of any length holds one window per curve
        bad = []
        read_iter = stream_windows(archive, resolution, start, end, args.skip_bad, "report", bad)
        chosen = select(read_iter, args.cluster, args.topic, args.partition, args.kind)
        curves, n = merge_curves(chosen, args.by, args.partition)
    if not n:
        raise ConfigError("archive: no windows match the selection")
    title = (
        f"latency by percentile — {args.kind}, {resolution} windows merged ({n})"
        + skipped_note(bad)
    )
    # each file whole or not at all (a full disk leaves none cut short), told by its own flag
    try:
        if out.suffix == ".html":
            write_html(curves, out, title)
        else:
            write_plot(curves, out, title)
    except OSError as exc:
        why = exc.strerror or exc
        raise ConfigError(f"out: cannot write {exc.filename or out}: {why}") from None
    if args.hlog:
        try:
            with atomic_write(args.hlog) as tmp:
                export_hlog(windows, tmp)
        except OSError as exc:
            raise ConfigError(f"hlog: cannot write {args.hlog}: {exc.strerror or exc}") from None
    print(f"wrote {out} ({len(curves)} curves from {n} windows{skipped_note(bad)})")
    return 0


def run_slo(args: argparse.Namespace) -> int:
    """Print attainment per objective over the span."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    from core.printable import printable
    from monitor.slo import attainments
    from runtime.config_io import load_sla

    sla = load_sla(args.sla)
    archive = Path(args.archive)
    try:
        since_s = parse_duration_s(args.since)
    except ValueError as exc:
        raise ConfigError(f"since: {exc}") from None
    resolution = args.resolution or finest_resolution(archive)
    start = int((time.time() - since_s) * 1e6)
    bad: list[ArchiveError] = []
    windows = stream_windows(archive, resolution, start, None, args.skip_bad, "slo", bad)
    rows = attainments(sla.objectives, windows)  # an hour of windows at a time, merged
    table = Table(title=f"SLO attainment, last {args.since}, from merged {resolution} histograms")
    for col in ("objective", "target", "samples", "attained", "met"):
        table.add_column(col)
    for o, r in zip(sla.objectives, rows, strict=True):
        value = r.get("value")
        shown = (
            "—" if value is None else (f"{value:.6g}" if isinstance(value, float) else str(value))
        )
        met = {None: "no data", True: "yes", False: "NO"}[r.get("met")]
        name = Text(printable(o.name))  # a Text: rich reads no markup in it
        table.add_row(name, str(r.get("target", "")), f"{r['samples']:,}", shown, met)
    Console(width=120).print(table)
    if bad:
        print(skipped_note(bad).removeprefix("; "))
    return 0
