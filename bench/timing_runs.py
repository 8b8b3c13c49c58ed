"""Run the suite's timing-sensitive tests N times and tally each test's passes (issue 41: a test
that fails once in ten on a quiet machine is broken). ``make timing`` (= ``python -m
bench.timing_runs --runs 10``; ``--only unit`` for the socket-level set, seconds a run). The set
is listed here, and kept by hand: a test whose assertion reads a clock, a CPU counter or a count
after a sleep belongs in it.

The tally lands in ``bench/results/timing_runs.json``, one part per ``--only`` choice (a run of one
part keeps the others'), and docs/benchmarks.md renders it (``bench.report_timing``). ``--merge``
adds the runs of earlier result files of the same part, so ten runs may be taken in sittings.
"""

from __future__ import annotations

import argparse
import functools
import json
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from subprocess import DEVNULL
from typing import Any

from bench.machine import RESULTS_DIR, machine_facts, write_result
from testkit.sigint import default_sigint

ROOT = Path(__file__).resolve().parent.parent
RESULTS = RESULTS_DIR / "timing_runs.json"
#: By kind: the servers' bounds, keep-alive windows and auth timing, the exporter's flood and
#: render lock, the probe's duration (sockets and threads, a minute a run); the probe and
#: exporter under floods and a broker's faults (a cluster each, minutes); the end-to-end ones;
#: the CTRL+Z calibrations on every broker kind, through the stream, Prometheus and the alerts
#: (their floor and stall bounds are analytic, their floor samples this run's own).
TIMING_SET = {
    "unit": [
        "tests/unit/runtime/test_webserver.py",
        "tests/unit/runtime/test_webserver_keepalive.py",
        "tests/unit/runtime/test_webserver_bounds.py",
        "tests/unit/runtime/test_webserver_negotiation.py",
        "tests/unit/exporter/test_exporter_flood.py",
        "tests/unit/exporter/test_exporter_body_cache.py",
        "tests/unit/probes/test_probe_limits.py",
    ],
    "integration": [
        "tests/integration/probes/test_probe_metrics_flood.py",
        "tests/integration/probes/test_probe_pressure.py",
        "tests/integration/probes/test_probe_fleet.py",
        "tests/integration/broker/test_broker_faults.py",
        "tests/integration/broker/test_broker_signals.py",
    ],
    "e2e": [
        "tests/e2e/test_metrics_keepalive_e2e.py",
        "tests/e2e/test_metrics_survive_clients_e2e.py",
        "tests/e2e/test_compare_e2e.py",
    ],
    #: The stream job's per-broker series: a broker's RTT shows in its series only, a latency
    #: bound (failed at load 17, four pytests at once, a CI-like run of 2026-12-07).
    "stream": ["tests/integration/streaming/test_stream_brokers.py"],
    "ctrl_z": [
        "tests/integration/broker/test_broker_ctrl_z_terminal.py",
        "tests/integration/probes/test_probe_faults.py",
        "tests/integration/probes/test_probe_transports.py",
        "tests/integration/streaming/test_stream_kafka.py",
        "tests/e2e/test_native_ctrl_z_e2e.py",
        "tests/e2e/test_alerting_e2e.py",
    ],
}


#: Seconds pytest has to stop its brokers, Spark and Prometheus when a sitting is stopped:
#: subprocess.run gives it 0.25 s and then kills it, and a killed sitting left Kafka's JVMs,
#: Spark and Prometheus running (load 4-6 on an idle machine).
TEARDOWN_S = 60.0
#: Characters kept of a failure's message: enough for the assertion and its figures.
MESSAGE_CHARS = 600


def run_once(files: list[str], report: Path) -> dict[str, str]:
    """One pytest run of ``files``: each test's outcome (passed, failure, error, skipped), and
    for a test that did not pass, ``outcome: message`` (junit's, cut to ``MESSAGE_CHARS``).
    pytest starts with SIGINT's default, so that it tears down on the SIGINT a stop sends it,
    even from a runner started in the background (which has SIGINT ignored)."""
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={report}"]
    with subprocess.Popen(
        [*cmd, *files], cwd=ROOT, stdout=DEVNULL, stderr=DEVNULL, preexec_fn=default_sigint
    ) as pytest:
        try:
            pytest.wait()
        except BaseException:  # Ctrl+C or SIGTERM: pytest tears its fixtures down first
            pytest.send_signal(signal.SIGINT)
            try:
                pytest.wait(TEARDOWN_S)
            except subprocess.TimeoutExpired:
                pytest.kill()
            raise
    outcomes = {}
    for case in ET.parse(report).iter("testcase"):
        name = f"{case.get('classname')}::{case.get('name')}"
        bad = [c for c in case if c.tag in ("failure", "error", "skipped")]
        outcomes[name] = (
            f"{bad[0].tag}: {(bad[0].get('message') or '')[:MESSAGE_CHARS]}" if bad else "passed"
        )
    return outcomes


def merge(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Two tallies of the same files as one: runs and outcomes added, each run's seconds and
    load kept in order, and each sitting's commit and time (a part of other files is refused:
    its tests are not the same)."""
    if a["files"] != b["files"]:
        raise ValueError(f"cannot merge tallies of different files: {a['files']} / {b['files']}")
    tally: dict[str, Counter[str]] = {}
    for part in (a, b):
        for name, counts in part["tally"].items():
            tally.setdefault(name, Counter()).update(counts)
    return {
        "files": a["files"],
        "runs": a["runs"] + b["runs"],
        "seconds": [*a.get("seconds", []), *b.get("seconds", [])],
        "loads": [*a["loads"], *b["loads"]],
        "sittings": [*a.get("sittings", []), *b.get("sittings", [])],
        "tally": {n: dict(c) for n, c in tally.items()},
        "failures": [*a.get("failures", []), *b.get("failures", [])],
    }


def failing(part: dict[str, Any]) -> dict[str, dict[str, int]]:
    """The tests that did not pass every run, with their outcomes."""
    return {n: c for n, c in part["tally"].items() if set(c) - {"passed"}}


def sitting(files: list[str], runs: int) -> Iterator[dict[str, Any]]:
    """``runs`` runs of ``files`` now: after each, the tally so far, each run's seconds and the
    1-min load after it (a sitting cut short keeps the runs it made)."""
    tally: dict[str, Counter[str]] = {}
    loads: list[float] = []
    seconds: list[float] = []
    failures: list[dict[str, Any]] = []
    for i in range(runs):
        started = time.monotonic()
        with tempfile.TemporaryDirectory(prefix="nines-timing-") as tmp:
            outcomes = run_once(files, Path(tmp) / "junit.xml")
        for name, outcome in outcomes.items():
            kind, _, message = outcome.partition(": ")
            tally.setdefault(name, Counter())[kind] += 1
            if message:
                failures.append({"test": name, "run": i + 1, "outcome": kind, "message": message})
        seconds.append(round(time.monotonic() - started, 1))
        loads.append(float(Path("/proc/loadavg").read_text().split()[0]))
        print(f"run {i + 1}/{runs}: {seconds[-1]:.0f} s, load {loads[-1]:.1f}", flush=True)
        facts = machine_facts()
        yield {
            "files": files,
            "runs": i + 1,
            "seconds": list(seconds),
            "loads": list(loads),
            "sittings": [{k: facts[k] for k in ("git_commit", "timestamp")} | {"runs": i + 1}],
            "tally": {n: dict(c) for n, c in tally.items()},
            "failures": list(failures),
        }


def earlier_part(path: Path, key: str) -> dict[str, Any]:
    """Part ``key`` of an earlier result file (or the whole file, if it holds one part)."""
    data = json.loads(path.read_text())
    return dict(data["parts"][key]) if "parts" in data else dict(data)


def save(out: Path, key: str, part: dict[str, Any]) -> None:
    """Part ``key`` of the result file replaced by ``part``, the other parts kept."""
    try:
        parts = json.loads(out.read_text()).get("parts", {})
    except (OSError, ValueError):
        parts = {}
    parts[key] = part
    write_result(out.stem, {"parts": parts}, out.parent)


def stop(signum: int, frame: object) -> None:
    """SIGTERM stops a sitting as Ctrl+C does: the run under way tears down, the runs made
    are kept."""
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--only", choices=sorted(TIMING_SET), action="append")
    ap.add_argument("--merge", type=Path, action="append", default=[], metavar="JSON",
                    help="add the runs of this earlier result of the same part")  # fmt: skip
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args(argv)
    kinds = [k for k in TIMING_SET if k in (args.only or TIMING_SET)]
    key = "+".join(kinds)
    earlier = [earlier_part(path, key) for path in args.merge]
    if not earlier and args.runs < 1:
        ap.error("nothing to tally: no run and no --merge")
    part = functools.reduce(merge, earlier) if earlier else {}
    for so_far in sitting([f for kind in kinds for f in TIMING_SET[kind]], args.runs):
        part = functools.reduce(merge, [*earlier, so_far])
        save(args.out, key, part)
    if not args.runs:
        save(args.out, key, part)
    loads = part["loads"]
    print(f"{key}: {len(part['tally'])} tests, {part['runs']} runs, load {min(loads):.1f}-"
          f"{max(loads):.1f}")  # fmt: skip
    for name, counts in sorted(failing(part).items()):
        print(f"  not always passed: {name}: {counts}")
    return 1 if failing(part) else 0


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, stop)
    raise SystemExit(main())
