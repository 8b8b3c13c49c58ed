"""``nines compare``: the essays' four-broker comparison, live, through the whole pipeline.

Kafka (a test broker: librdkafka's mock cluster, or Tansu), NATS, Redis pub/sub and RabbitMQ
(publisher confirms) are started here, on this host, and probed one after the other at the
essays' configurations, scaled to this machine. Every probe publishes its echoes to one Kafka
echo cluster and one stream job (Spark included) keeps the histograms; the curves and the table
are read from merged closed windows, never from averaged quantiles. The essays' own caveats hold
and are printed with the results: one host for all (the systems, the probes and Spark share two
cores), single nodes, and a test broker for Kafka.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from core.config import ConfigError, build
from core.echo import DEFAULT_ECHO_TOPIC
from core.hdr import REPORTED_QUANTILES, min_samples_for, quantile_label
from core.units import parse_duration_s, parse_size_bytes
from core.windows import ALL_PARTITIONS, WindowHistogram, merge_all

EXAMPLES = """examples:
  nines compare                                   # all four systems, the four cases, 30 s each
  nines compare --systems nats,redis --cases 1KiB@3000 --duration 10s --out /tmp/cmp
"""

#: The systems, in the order they are run and drawn.
SYSTEMS = ("kafka", "nats", "redis", "rabbitmq")
#: Caveats printed with every result: the essays' own, and this machine's.
CAVEATS = (
    "same host: every system, every probe and the Spark job share this machine's cores",
    "single nodes: no replication, no network between client and server",
    "rates scaled to this machine: the essays ran one producer per broker host",
)
#: Seconds a message may take before the probe counts it lost (short: runs are short).
LOSS_TIMEOUT_S = 5.0
#: Event-time slack of the comparison's stream job: a lost message's echo leaves the probe a loss
#: timeout after its intended time, so the watermark waits that long and a margin, or the losses
#: would arrive late (counted, in no window) and the table would under-count the tail.
WINDOW, WATERMARK_S = "10s", LOSS_TIMEOUT_S + 5.0
#: Seconds of echoes the stream job takes before the first case (its cold start is no case's).
WARMUP_S = 10.0
#: Seconds each fresh server is probed before its first case (connections, first allocations):
#: measured, the first case after a cold start read a p50 1.6-11× the same system's next case.
SYSTEM_WARMUP_S = 5.0


@dataclass(frozen=True)
class Case:
    """One configuration: a payload size at a fixed rate (open loop)."""

    size_bytes: int
    rate: float

    @property
    def key(self) -> str:
        """Label-safe name, e.g. ``1024B-3000``."""
        return f"{self.size_bytes}B-{self.rate:g}"

    @property
    def label(self) -> str:
        """As the table says it, e.g. ``1024 B at 3,000 msgs/s``."""
        return f"{self.size_bytes:,} B at {self.rate:,.0f} msgs/s"

    @classmethod
    def parse(cls, text: str) -> Case:
        """``SIZE@RATE``, e.g. ``1KiB@3000``."""
        size, sep, rate = text.partition("@")
        if not sep:
            raise ConfigError(f"cases: expected SIZE@RATE like 1KiB@3000 (got {text!r})")
        try:
            return cls(parse_size_bytes(size.strip()), float(rate))
        except ValueError as exc:
            raise ConfigError(f"cases: {exc} (in {text!r})") from None


#: The essays' configurations (256 B, 1 KB, 5 KB at 3,000/s-class rates, then 1 KB at 20,000/s),
#: at rates this 2-core host sustains beside Spark.
CASES = (Case(256, 3000), Case(1024, 3000), Case(5120, 2000), Case(1024, 20000))


def cluster_label(system: str, case: Case, again: bool = False) -> str:
    """The probe's ``cluster`` label: which system and case a series belongs to (``again``: the
    first case's second run, at the end of the system's cases)."""
    return f"compare.{system}.{case.key}" + (".again" if again else "")


#: A p99 of the first case's second run more than this many times above or below its first run
#: is printed as unstable: the system (or the machine) was not in one state through its cases.
UNSTABLE_RATIO = 2.0


def stability(first_p99_s: float | None, again_p99_s: float | None) -> str:
    """``stable``, ``unstable`` (p99s more than UNSTABLE_RATIO apart), or ``?`` (no p99)."""
    if not first_p99_s or not again_p99_s:
        return "?"
    ratio = max(first_p99_s, again_p99_s) / min(first_p99_s, again_p99_s)
    return "unstable" if ratio > UNSTABLE_RATIO else "stable"


def summarise(hist_by_label: dict[str, WindowHistogram]) -> dict[str, dict[str, Any]]:
    """Per label: samples, lost, the reported quantiles its sample count supports, and the max."""
    out: dict[str, dict[str, Any]] = {}
    for label, w in hist_by_label.items():
        total = w.hist.total
        row: dict[str, Any] = {"samples": total, "lost": w.lost, "max_s": w.hist.max_us / 1e6}
        for q in REPORTED_QUANTILES:
            enough = total >= min_samples_for(q)
            row[quantile_label(q)] = w.hist.value_at_quantile(q) / 1e6 if enough else None
        out[label] = row
    return out


def markdown(result: dict[str, Any], img_dir: str | None = None) -> str:
    """The four-system table per case (ms), each with its plot when ``img_dir`` is given."""
    labels = [quantile_label(q) for q in REPORTED_QUANTILES]
    engine = result.get("kafka_engine", "mock")
    kafka = {
        "kafka": f"Apache Kafka {result.get('kafka_version') or ''} (one KRaft broker, RF 1)",
        "mock": "librdkafka's mock cluster (a test double, not Kafka's numbers)",
        "tansu": "Tansu (a Kafka-compatible broker, not Apache Kafka)",
    }.get(engine, engine)
    rerun = any(
        "again_p99_s" in row for case in result["cases"] for row in case["systems"].values()
    )
    lines = [
        f"The `kafka` row is {kafka}. "
        f"Each system probed for {result['duration_s']:g} s per case (open loop, latency from the "
        "intended send time), end to end through the stream job. Caveats: "
        + "; ".join(result["caveats"])
        + "."
        + (
            " Load average (1 min) at the start and the end of the run: "
            + " and ".join(f"{x:g}" for x in result["load_avg_1m"])
            + " on this machine's "
            + f"{os.cpu_count()} cores."
            if result.get("load_avg_1m")
            else ""
        ),
        "",
        (
            f"Warm-up, the same for every system: each is started fresh, then probed for "
            f"{SYSTEM_WARMUP_S:g} s at the first case's size before its first case (Apache "
            "Kafka's `nines broker` also warms its JVMs until a second's acks have p99 < 50 ms "
            "or stop improving, before it says ready). Each system runs its first case again "
            "after its last: `p99 again` is that run's p99, and a p99 more than "
            f"{UNSTABLE_RATIO:g}× apart between the two runs is marked **unstable**."
            if rerun
            else "This run predates the warm-up rule and the second run of the first case "
            "(issue 31): its first case may read a system still warming up."
        ),
        "",
        "Latencies in milliseconds, read from the merged closed windows. `expected` is rate × "
        "duration; `samples` counts the e2e samples in the windows, lost messages included at "
        f"their loss timeout ({LOSS_TIMEOUT_S:g} s); `lost` is how many of them were lost; `late` "
        "counts echo records that reached the job after their window had closed (counted, in "
        "no window). The rest of what is missing from `expected` the probe itself reports when "
        "it stops (its summary file): messages still unresolved at its shutdown timeout "
        "(they have no echo) and echoes its bounded buffer dropped. A quantile needs enough "
        "samples to exist (—).",
        "",
    ]
    for i, case in enumerate(result["cases"]):
        lines.append(f"**{case['label']}**\n")
        if img_dir:
            lines.append(f"![latency by percentile, {case['label']}]({img_dir}/{case['plot']})\n")
        head = ["system", "expected", "samples", "lost", "late", "unresolved", "echoes dropped"]
        tail = ["max", "p99 again", "stability"] if i == 0 and rerun else ["max"]
        lines.append("| " + " | ".join(head + labels + tail) + " |")
        lines.append("|---" * (len(head) + len(labels) + len(tail)) + "|")
        expected = case.get("expected")
        for system, row in case["systems"].items():
            probe = row.get("probe") or {}
            counts = [
                "?" if expected is None else f"{expected:,}",
                f"{row['samples']:,}",
                f"{row['lost']:,}",
                "?" if row.get("late") is None else f"{row['late']:,}",
                *(f"{probe[k]:,}" if k in probe else "?" for k in ("unresolved", "echo_dropped")),
            ]
            cells = ["—" if row[x] is None else f"{row[x] * 1e3:.3f}" for x in labels]
            ends = [f"{row['max_s'] * 1e3:.3f}"]
            if i == 0 and rerun:
                again = row.get("again_p99_s")
                verdict = row.get("stability", "?")
                ends += ["—" if again is None else f"{again * 1e3:.3f}",
                         f"**{verdict}**" if verdict == "unstable" else verdict]  # fmt: skip
            lines.append(f"| {system} | " + " | ".join(counts + cells + ends) + " |")
        lines.append("")
    return "\n".join(lines)


def run_compare(
    systems: Sequence[str],
    cases: Sequence[Case],
    duration_s: float,
    out_dir: Path,
    say: Callable[[str], None] = print,
    kafka_engine: str = "kafka",
) -> dict[str, Any]:
    """Start each system, probe it at every case, merge the closed windows; write JSON and plots."""
    from monitor.report.plot import write_plot

    out_dir.mkdir(parents=True, exist_ok=True)
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="nines-compare-") as tmp:
        windows, seen, late, totals = _run_all(
            systems, cases, duration_s, Path(tmp), say, kafka_engine
        )
    result: dict[str, Any] = {
        "duration_s": duration_s,
        "kafka_engine": kafka_engine,
        "kafka_version": _kafka_version() if kafka_engine == "kafka" else None,
        "caveats": list(CAVEATS),
        # the machine's other load moves every figure: say it (1-minute averages)
        "load_avg_1m": [round(load_before, 2), round(os.getloadavg()[0], 2)],
        "cases": [],
    }
    for case in cases:
        merged = {
            system: merge_all(windows[cluster_label(system, case)])
            for system in systems
            if windows.get(cluster_label(system, case))
        }
        missing = [s for s in systems if s not in merged]
        if missing:
            raise RuntimeError(f"{case.label}: no closed window from {', '.join(missing)}")
        plot = f"compare-{case.key}.png"
        write_plot(merged, out_dir / plot, f"end-to-end latency by percentile, {case.label}")
        rows = summarise(merged)
        if case == cases[0]:
            for system, row in rows.items():
                w = windows.get(cluster_label(system, case, again=True))
                again = summarise({system: merge_all(w)})[system]["p99"] if w else None
                row["again_p99_s"] = again
                row["stability"] = stability(row["p99"], again)
        for system, row in rows.items():
            row["late"] = late.get(cluster_label(system, case), 0)
            row["system_echoes"] = seen.get(cluster_label(system, case), {})
            row["probe"] = totals.get(cluster_label(system, case), {})
        result["cases"].append(
            {
                "key": case.key,
                "label": case.label,
                "plot": plot,
                "expected": round(case.rate * duration_s),
                "systems": rows,
            }
        )
    (out_dir / "compare.json").write_text(json.dumps(result, indent=1))
    return result


def _run_all(
    systems: Sequence[str],
    cases: Sequence[Case],
    duration_s: float,
    tmp: Path,
    say: Any,
    kafka_engine: str,
) -> tuple[
    dict[str, list[WindowHistogram]],
    dict[str, dict[str, int]],
    dict[str, int],
    dict[str, dict[str, int]],
]:
    """The echo cluster and stream job once; each system in turn; then close the last windows.

    Returns, by cluster label: the closed e2e windows, the job's echo counts by system, the late
    records, and each probe's stop totals."""
    from monitor.pipeline import PipelineConfig, StreamPipeline
    from monitor.processes import jvm_output_to
    from testbroker import EmbeddedBroker

    windows: dict[str, list[WindowHistogram]] = defaultdict(list)
    totals: dict[str, dict[str, int]] = {}
    late: dict[str, int] = defaultdict(int)
    #: echoes by the ``system`` their records name, per cluster label: what the job exports as
    #: ``nines_system_echoes_total``
    systems_seen: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    wanted = {cluster_label(s, c) for s in systems for c in cases}
    wanted |= {cluster_label(s, cases[0], again=True) for s in systems}

    def on_batch(_batch_id: int, closed: list[WindowHistogram], counters: Any) -> None:
        for (cluster, _topic, _partition), n in counters.late.items():
            if cluster in wanted:
                late[cluster] += n
        for (cluster, system), n in counters.systems.items():
            if cluster in wanted:
                systems_seen[cluster][system] += n
        for w in closed:
            s = w.series
            topic_wide = s.partition == ALL_PARTITIONS and not s.broker  # not a broker rollup
            if s.cluster in wanted and s.kind == "e2e" and topic_wide:
                windows[s.cluster].append(w)

    # the echo cluster is the mock: it ingests every system's echoes at 20,000/s without strain
    with EmbeddedBroker(topics=[(DEFAULT_ECHO_TOPIC, 2), ("nines.probe", 1)]) as echo:
        say(f"echo cluster {echo.bootstrap}; stream job starting (logs in {tmp})")
        config = build(
            PipelineConfig,
            {
                "bootstrap": echo.bootstrap,
                "windows": WINDOW,
                "watermark": f"{WATERMARK_S:g}s",
                "trigger": "1s",
                "starting_offsets": "earliest",
                "metrics_port": 0,
                "master": "local[2]",
                "checkpoint": str(tmp / "checkpoint"),
                "spark_log": str(tmp / "spark.log"),  # with the JVM's output (jvm_output_to)
            },
        )
        job = StreamPipeline(config, on_batch=on_batch)
        with jvm_output_to(tmp / "spark.log"):
            job.start(serve=False)
        try:
            # Spark compiles and warms its first batches: on echoes of no case, not the first's
            say(f"warming the stream job up for {WARMUP_S:g} s")
            _probe(echo.bootstrap, echo.bootstrap, "compare.warmup", Case(256, 1000), WARMUP_S, tmp)
            for system in systems:
                with _target(system, tmp, kafka_engine) as url:
                    say(f"{system}: warming up for {SYSTEM_WARMUP_S:g} s")
                    warm = Case(cases[0].size_bytes, min(cases[0].rate, 1000))
                    label = f"compare.warmup.{system}"
                    _probe(url, echo.bootstrap, label, warm, SYSTEM_WARMUP_S, tmp)
                    for case in cases:
                        say(f"{system}: {case.label} for {duration_s:g} s")
                        label = cluster_label(system, case)
                        totals[label] = _probe(url, echo.bootstrap, label, case, duration_s, tmp)
                    say(f"{system}: {cases[0].label} again, for {duration_s:g} s")
                    label = cluster_label(system, cases[0], again=True)
                    totals[label] = _probe(url, echo.bootstrap, label, cases[0], duration_s, tmp)
            # no echo after the last run would ever close its windows: a slow probe of the echo
            # cluster itself moves event time past them
            clock_s = parse_duration_s(WINDOW) + WATERMARK_S + 8
            _probe(echo.bootstrap, echo.bootstrap, "compare.clock", Case(64, 20), clock_s, tmp)
            deadline = time.monotonic() + 60
            while not wanted <= set(windows) and time.monotonic() < deadline:
                time.sleep(1)
        finally:
            job.stop()
    return windows, {k: dict(v) for k, v in systems_seen.items()}, late, totals


def _kafka_version() -> str:
    from testbroker.kafka_jars import kafka_version

    return kafka_version()


@contextlib.contextmanager
def _target(system: str, tmp: Path, kafka_engine: str) -> Iterator[str]:
    """The system's server, started for the comparison; yields the probe's ``--bootstrap``."""
    if system == "kafka":
        from testbroker import EmbeddedBroker

        engines: dict[str, Literal["mock", "tansu", "kafka"]] = {
            "mock": "mock", "tansu": "tansu", "kafka": "kafka"}  # fmt: skip
        # one broker, replication factor 1: like the other systems' single nodes
        topics = [("nines.probe", 1, 1), (DEFAULT_ECHO_TOPIC, 2, 1)]
        if kafka_engine != "kafka":
            topics = [("nines.probe", 1)]  # type: ignore[list-item]
        with EmbeddedBroker(engine=engines[kafka_engine], brokers=1, topics=topics) as kafka:
            yield kafka.bootstrap
        return
    from testbroker.servers import SERVERS, RabbitServer

    (tmp / system).mkdir(parents=True, exist_ok=True)
    server = SERVERS[system](tmp / system).start()
    try:
        if isinstance(server, RabbitServer):
            server.declare_queue("nines.probe")  # the probe never creates the queue it reads
        yield server.url
    finally:
        if isinstance(server, RabbitServer):
            server.close()
        else:
            server.stop()


def _probe(
    url: str, echo: str, cluster: str, case: Case, duration_s: float, tmp: Path
) -> dict[str, int]:
    """One probe process for ``duration_s``, open loop, then its drain; fails on a bad exit.

    Returns the totals of the probe's summary file (``probes.summary.FIELDS``)."""
    from probes.summary import read_summary

    log = tmp / f"{cluster}.log"
    summary = tmp / f"{cluster}.summary.json"
    cmd = [
        sys.executable, "-m", "monitor", "probe", "--bootstrap", url, "--echo-bootstrap", echo,
        "--rate", f"{case.rate:g}", "--size", str(case.size_bytes), "--cluster", cluster,
        "--probe-id", cluster, "--duration", f"{duration_s:g}s",
        "--loss-timeout", f"{LOSS_TIMEOUT_S:g}s", "--metrics-port", "0",
        "--summary-file", str(summary),
    ]  # fmt: skip
    summary.unlink(missing_ok=True)  # a warm-up's under the same name is not this run's
    with log.open("ab") as err:
        proc = subprocess.run(
            cmd, stdout=subprocess.DEVNULL, stderr=err, timeout=duration_s + 120, check=False
        )
    if proc.returncode != 0:
        tail = log.read_text(errors="replace")[-800:]
        raise RuntimeError(f"probe {cluster} exited {proc.returncode}: {tail}")
    return read_summary(summary)


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add the ``compare`` subcommand."""
    p = sub.add_parser(
        "compare",
        help="probe Kafka, NATS, Redis and RabbitMQ side by side (the essays' comparison, live)",
        description=__doc__,
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--systems", default=",".join(SYSTEMS), help="comma-separated (default: all)")
    p.add_argument(
        "--cases",
        default=",".join(f"{c.size_bytes}B@{c.rate:g}" for c in CASES),
        help="comma-separated SIZE@RATE (default: the essays' four, scaled)",
    )
    p.add_argument("--duration", default="30s", help="per system and case (default 30s)")
    p.add_argument(
        "--kafka-engine",
        choices=("kafka", "mock", "tansu"),
        default="kafka",
        help="the Kafka broker: Apache Kafka (default, one KRaft broker, RF 1, as the other "
        "systems' single nodes), or the mock / Tansu test doubles",
    )
    p.add_argument("--out", default="nines-compare", help="directory for compare.json and plots")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Validate the flags, run the comparison, print the table."""
    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    unknown = [s for s in systems if s not in SYSTEMS]
    if unknown or not systems:
        raise ConfigError(f"systems: expected some of {', '.join(SYSTEMS)} (got {args.systems!r})")
    cases = [Case.parse(c) for c in args.cases.split(",") if c.strip()]
    if not cases:
        raise ConfigError("cases: at least one SIZE@RATE")
    try:
        duration_s = parse_duration_s(args.duration)
    except ValueError as exc:
        raise ConfigError(f"duration: {exc}") from None
    if duration_s < 5:
        raise ConfigError(f"duration: at least 5s per run (got {args.duration!r})")
    result = run_compare(systems, cases, duration_s, Path(args.out), kafka_engine=args.kafka_engine)
    print(markdown(result))
    print(f"plots and compare.json in {args.out}")
    return 0
