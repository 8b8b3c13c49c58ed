"""``nines demo``: broker, probe and stream job embedded, with a live view of the high nines.

The probe runs as its own process (as in production) so the Spark driver cannot disturb its
schedule; the embedded broker is a test cluster we can stall on purpose (``--hiccup``).
"""

from __future__ import annotations

import argparse
import contextlib
import re
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from core.config import ConfigError, build
from core.sla import SlaConfig
from core.units import format_duration, parse_duration_s
from core.windows import WindowSpec
from monitor.exporter.config import ExporterConfig
from monitor.processes import StopFlag as _StopFlag
from monitor.processes import jvm_output_to
from monitor.processes import probe_process as _probe_process
from monitor.processes import terminate as _terminate
from monitor.terminal_tables import render_tables
from runtime.config_io import check_port_free, load_sla

if TYPE_CHECKING:
    from monitor.pipeline import PipelineConfig

EXAMPLES = """examples:
  nines demo                          # run until Ctrl+C
  nines demo --duration 60            # one minute, then exit 0
  nines demo --hiccup 5s@30s          # stall the embedded broker for 5 s after 30 s (CTRL+Z test)
"""


@dataclass(frozen=True)
class Hiccup:
    """Stall the embedded broker for ``duration_s`` once, ``at_s`` seconds into the demo."""

    duration_s: float
    at_s: float


def parse_hiccup(text: str) -> Hiccup:
    """'5s@30s' -> Hiccup(5, 30)."""
    m = re.fullmatch(r"\s*([^@]+)@([^@]+)\s*", text)
    if not m:
        raise ConfigError(f"hiccup: expected DURATION@OFFSET like 5s@30s (got {text!r})")
    try:
        return Hiccup(parse_duration_s(m.group(1)), parse_duration_s(m.group(2)))
    except ValueError as exc:
        raise ConfigError(f"hiccup: {exc}") from None


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add the ``demo`` subcommand."""
    p = sub.add_parser(
        "demo",
        help="Run broker, probe and stream job embedded, with a live terminal view.",
        description="Runs everything embedded: `nines broker` (a test cluster, not a production "
        "broker), a probe at a fixed rate, and the Spark job in local mode with its Prometheus "
        "exporter. Shows per topic and partition the samples, p50 … p99.999, max and lost of the "
        "latest closed window, refreshed each trigger.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--duration", default=None, help="stop after this long (e.g. 60, 2m); default: until Ctrl+C"
    )
    p.add_argument(
        "--rate", default="100", help="probe messages per partition per second (default 100)"
    )
    p.add_argument(
        "--hiccup", default=None, help="stall the broker once: DURATION@OFFSET, e.g. 5s@30s"
    )
    p.add_argument(
        "--metrics-port",
        type=int,
        default=DEFAULT_METRICS_PORT,
        help=f"exporter port (default {DEFAULT_METRICS_PORT}; 0 = any free port)",
    )
    p.add_argument("--window", default="10s", help="finest window (default 10s); 1m is shown too")
    p.add_argument(
        "--watermark",
        default=None,
        help="watermark delay (default 3s: the demo is fresh; with --hiccup, the stall + 5s, so "
        "the backlog a stall leaves behind is not late)",
    )
    p.add_argument("--trigger", default="2s", help="micro-batch trigger (default 2s)")
    p.add_argument(
        "--workdir", default=None, help="checkpoint and archive directory (default: a temp dir)"
    )
    p.add_argument("--plain", action="store_true", help="print tables instead of a live view")
    p.add_argument(
        "--sla",
        default=DEFAULT_SLA,
        help="SLA: objectives shown live, rules written to the workdir (default: the demo's own, "
        "monitor/demo-sla.yaml, shipped in the package)",
    )
    p.set_defaults(func=run)


#: The demo's SLA, sized for the embedded broker: package data, so that the demo shows its SLA
#: table from any working directory and from a pip-installed wheel.
DEFAULT_SLA = str(Path(__file__).with_name("demo-sla.yaml"))
#: Brokers of the embedded cluster; the probe topic has one partition per broker.
DEMO_BROKERS = 3
#: The exporter's port unless --metrics-port says otherwise: the exporter's own default.
DEFAULT_METRICS_PORT: int = ExporterConfig.model_fields["metrics_port"].default
#: The demo always shows 1m windows beside ``--window``.
COARSE_WINDOW_S = 60


@dataclass(frozen=True)
class DemoOptions:
    """The demo's flags, validated before anything starts."""

    duration_s: float | None
    window_s: float
    rate: float
    hiccup: Hiccup | None
    sla: SlaConfig | None = None


def validate(args: argparse.Namespace) -> DemoOptions:
    """Check every flag; raise ConfigError naming the flag before any process starts."""
    from probes.config import MAX_TOTAL_RATE, ProbeConfig

    duration_s = _duration(args.duration, "duration") if args.duration is not None else None
    window_s = _duration(args.window, "window")
    try:
        WindowSpec.from_names([args.window])
    except ValueError:
        raise ConfigError(
            f"window: must be whole seconds, at least 1s (got {args.window!r})"
        ) from None
    try:
        WindowSpec.from_names([args.window, format_duration(COARSE_WINDOW_S)])  # stream's rule
    except ValueError:
        raise ConfigError(
            f"window: {format_duration(window_s)} and the 1m windows the demo also shows must "
            f"divide one another; use e.g. 5s, 10s, 30s or 5m (got {args.window!r})"
        ) from None
    rate = build(ProbeConfig, {"bootstrap": "demo", "rate": args.rate}).rate
    total = rate * DEMO_BROKERS
    if total > MAX_TOTAL_RATE:
        raise ConfigError(
            f"rate: {rate:g}/s × {DEMO_BROKERS} partitions = {total:g}/s exceeds the probe's "
            f"limit of {MAX_TOTAL_RATE:g}/s"
        )
    hiccup = parse_hiccup(args.hiccup) if args.hiccup is not None else None
    if hiccup is not None:
        if hiccup.duration_s <= 0:
            raise ConfigError(f"hiccup: the stall must last more than 0s (got {args.hiccup!r})")
        if duration_s is not None and hiccup.at_s >= duration_s:
            raise ConfigError(
                f"hiccup: starts at +{hiccup.at_s:g}s, after the demo ends "
                f"(--duration {args.duration}); got {args.hiccup!r}"
            )
    args.watermark = _watermark(args.watermark, hiccup)
    _stream_config(args, window_s, "127.0.0.1:9092", Path("."))
    check_port_free("127.0.0.1", args.metrics_port)
    if args.workdir is not None and Path(args.workdir).exists() and not Path(args.workdir).is_dir():
        raise ConfigError(f"workdir: {args.workdir} exists and is not a directory")
    sla_path = getattr(args, "sla", None)
    if sla_path and not Path(sla_path).is_file():
        raise ConfigError(f"sla: no such file {sla_path!r}")
    sla = load_sla(sla_path) if sla_path else None
    return DemoOptions(duration_s, window_s, rate, hiccup, sla)


def _duration(text: str, field: str) -> float:
    try:
        return parse_duration_s(text)
    except ValueError as exc:
        raise ConfigError(f"{field}: {exc}") from None


#: The demo's watermark without a stall: its windows close soon after they end.
WATERMARK_S = 3.0
#: How much longer than a --hiccup stall the watermark waits: the stall's backlog drains in
#: micro-batches after SIGCONT, and on a busy machine it spans more than one (measured: with a
#: 3 s watermark, a 4 s stall's echoes came late and no window showed the stall).
HICCUP_MARGIN_S = 5.0


def _watermark(flag: str | None, hiccup: Hiccup | None) -> str:
    """The watermark: the flag's, else one that outlasts the stall; a shorter one is refused."""
    if flag is None:
        wait_s = (
            WATERMARK_S if hiccup is None else max(WATERMARK_S, hiccup.duration_s + HICCUP_MARGIN_S)
        )
        return format_duration(wait_s)
    if hiccup is not None and _duration(flag, "watermark") <= hiccup.duration_s:
        raise ConfigError(
            f"watermark: {flag} does not outlast the {format_duration(hiccup.duration_s)} stall "
            "of --hiccup: the stalled echoes would arrive late and no window would show the stall"
        )
    return flag


class _Losses:
    """What the job counts but no table row shows: late and bad records, lost messages,
    vanished offsets (totals since the start), so nothing leaves the screen silently."""

    def __init__(self) -> None:
        from streaming.counters import StreamCounters

        self._lock = threading.Lock()
        self.totals = StreamCounters()

    def __call__(self, batch_id: int, windows: object, counters: Any) -> None:
        with self._lock:
            self.totals = self.totals.merge(counters)

    def line(self) -> str | None:
        """One line of every nonzero count, or None while there is none."""
        with self._lock:
            t = self.totals
        counts: dict[str, dict[Any, int]] = {
            "late echoes (after their window closed: counted, in no window)": t.late,
            "lost messages (in the tail at their loss timeout)": t.lost,
            "bad records": t.bad,
            "offsets gone before they were read": t.data_loss,
        }
        parts = [f"{sum(c.values()):,} {what}" for what, c in counts.items() if sum(c.values())]
        return "counted: " + "; ".join(parts) if parts else None


#: PipelineConfig field -> the demo flag that sets it.
_STREAM_FLAGS = {"windows": "window", "metrics_port": "metrics-port"}


def _stream_config(
    args: argparse.Namespace, window_s: float, bootstrap: str, workdir: Path
) -> PipelineConfig:
    """The demo's stream job config; a bad flag is reported under the demo's flag name."""
    from monitor.pipeline import PipelineConfig

    values = {
        "bootstrap": bootstrap,
        "windows": (format_duration(window_s), "1m"),
        "watermark": args.watermark,
        "trigger": args.trigger,
        "metrics_port": args.metrics_port,
        "starting_offsets": "earliest",
        "checkpoint": str(workdir / "checkpoint"),
        "archive": str(workdir / "archive"),
        "master": "local[2]",
        # the file the JVM's own output goes to (jvm_output_to): Spark's traces join it
        "spark_log": str(workdir / "spark.log"),
    }
    try:
        return build(PipelineConfig, values)
    except ConfigError as exc:
        field, sep, rest = str(exc).partition(": ")
        raise ConfigError(f"{_STREAM_FLAGS.get(field, field)}{sep}{rest}") from None


def run(args: argparse.Namespace) -> int:
    """Validate every flag, then run the embedded pipeline until the duration ends or Ctrl+C."""
    opts = validate(args)
    with contextlib.ExitStack() as stack:
        workdir = Path(
            args.workdir or stack.enter_context(tempfile.TemporaryDirectory(prefix="nines-demo-"))
        )
        return _run_pipeline(args, opts, workdir)


def _run_pipeline(args: argparse.Namespace, opts: DemoOptions, workdir: Path) -> int:
    from monitor.pipeline import StreamPipeline
    from testbroker import EmbeddedBroker

    stop = _StopFlag()
    out = _Output(plain=args.plain or not sys.stdout.isatty())
    workdir.mkdir(parents=True, exist_ok=True)
    out.line("nines demo: starting the embedded broker (a test cluster, not a production broker)")
    with EmbeddedBroker(brokers=DEMO_BROKERS) as broker:
        out.line(f"  broker   {broker.bootstrap}")
        stream_cfg = _stream_config(args, opts.window_s, broker.bootstrap, workdir)
        hiccup = opts.hiccup
        probe_log = workdir / "probe.log"
        with _probe_process(broker.bootstrap, str(opts.rate), probe_log) as probe:
            out.line(f"  probe    pid {probe.pid}, {opts.rate:g} msgs/s per partition, open loop")
            spark_log = workdir / "spark.log"
            out.line(f"  logs     Spark/JVM: {spark_log}  probe: {probe_log}")
            losses = _Losses()
            job = StreamPipeline(stream_cfg, on_batch=losses)
            with jvm_output_to(spark_log):
                job.start()
            try:
                out.line(f"  metrics  http://{stream_cfg.metrics_host}:{job.metrics_port}/metrics")
                out.line(
                    f"  archive  {workdir / 'archive'}  (nines report --archive ... --out plot.png)"
                )
                if opts.sla is not None:
                    rules = _write_rules(opts.sla, workdir)
                    out.line(f"  sla      {args.sla}: rules for Prometheus in {rules}")
                if hiccup:
                    out.line(
                        f"  hiccup   broker stalls for {hiccup.duration_s:g}s at +{hiccup.at_s:g}s"
                    )
                out.line("Ctrl+C to stop.")
                _loop(job, broker, probe, opts, stop, out, losses)
            finally:
                job.stop()
                _terminate(probe)
    out.line("nines demo: stopped cleanly.")
    if not args.workdir:
        out.line("  (the temp workdir and its logs are removed now; --workdir DIR keeps them)")
    return 0


def _write_rules(sla: SlaConfig, workdir: Path) -> Path:
    """The SLA's Prometheus rules, as ``nines alerts render`` writes them."""
    import yaml

    from monitor.alerts.rules import render_rules

    path = workdir / "rules.yaml"
    workdir.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(render_rules(sla), sort_keys=False))
    return path


def _loop(job, broker, probe, opts, stop, out, losses) -> None:  # type: ignore[no-untyped-def]
    duration_s, hiccup = opts.duration_s, opts.hiccup
    started = time.monotonic()
    stalled_until: float | None = None
    shown_end: dict[str, int] = {}
    shown_losses: str | None = None
    with out.live() as live:
        while not stop.set:
            now = time.monotonic() - started
            if duration_s is not None and now >= duration_s:
                break
            if probe.poll() is not None:
                raise RuntimeError(f"the probe exited with status {probe.returncode}")
            if hiccup and stalled_until is None and now >= hiccup.at_s:
                broker.pause()
                stalled_until = now + hiccup.duration_s
                out.line(f"[+{now:5.1f}s] broker SIGSTOPped for {hiccup.duration_s:g}s")
            if stalled_until is not None and stalled_until > 0 and now >= stalled_until:
                broker.resume()
                stalled_until = -1.0
                out.line(f"[+{now:5.1f}s] broker SIGCONTinued")
            latest = job.latest_windows()
            ends = {
                res: max((w.window_end_us for w in ws), default=0) for res, ws in latest.items()
            }
            if ends and ends != shown_end:
                shown_end = ends
                live.update(render_tables(latest, opts.sla))
            counted = losses.line()
            if counted != shown_losses:
                shown_losses = counted
                out.line(f"[+{now:5.1f}s] {counted}")
            time.sleep(0.25)
        if stalled_until is not None and stalled_until > 0:
            broker.resume()


class _Output:
    """Live view on a terminal; plain tables otherwise (CI logs, pipes)."""

    def __init__(self, plain: bool) -> None:
        from rich.console import Console

        self.plain = plain
        self.console = Console(width=140) if plain else Console()

    def line(self, text: str) -> None:
        from rich.text import Text

        from core.printable import printable
        from core.redact import redact_text

        self.console.print(Text(printable(redact_text(text))), highlight=False)

    @contextlib.contextmanager
    def live(self) -> Iterator[object]:
        if self.plain:
            yield _PlainLive(self.console)
            return
        from rich.live import Live

        with Live(console=self.console, refresh_per_second=4, transient=False) as live:
            yield live


class _PlainLive:
    def __init__(self, console: object) -> None:
        self.console = console

    def update(self, renderable: object) -> None:
        self.console.print(renderable)  # type: ignore[attr-defined]
