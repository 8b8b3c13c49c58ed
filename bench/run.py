"""``python -m bench.run``: run the benchmarks, fold their JSON together, regenerate the report.

Each part runs independently; a part that cannot run (e.g. the broker will not start) is
recorded as skipped or failed with the reason, and the report says so.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.machine import RESULTS_DIR, PartSkipped, machine_facts

ROOT = Path(__file__).resolve().parent.parent
PARTS = (
    "accuracy",
    "co",
    "probe",
    "aggregation",
    "e2e",
    "sweep",
    "health",
    "floor",
    "formats",
    "compare",
    "scale",
    "stages",
    "pressure",
    "flood",
    "fleet",
)


def _accuracy(quick: bool) -> None:
    """Accuracy of the high nines (pure numpy)."""
    from bench.accuracy import run_accuracy

    run_accuracy(quick=quick)


def _co(quick: bool) -> None:
    """The CTRL+Z test against a real embedded broker."""
    from bench.coordinated_omission import run_co

    run_co(quick=quick)


def _pytest_bench(test_file: str, result: str, quick: bool, timeout_s: float) -> None:
    """Run one ``tests/bench`` file with ``-m bench``; it must write ``bench/results/<result>``."""
    out = RESULTS_DIR / result
    before = out.stat().st_mtime if out.exists() else None
    env = dict(os.environ, NINES_BENCH_QUICK="1" if quick else "0")
    cmd = [sys.executable, "-m", "pytest", "-m", "bench", "-q", "-p", "no:cacheprovider", test_file]
    proc = subprocess.run(
        cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout_s, check=False
    )
    tail = (proc.stdout + proc.stderr).strip().splitlines()[-3:]
    if not out.exists() or out.stat().st_mtime == before:
        raise RuntimeError(f"pytest exit {proc.returncode}, no fresh {result}: {' | '.join(tail)}")
    _stamp_machine(out)
    if proc.returncode != 0:
        raise RuntimeError(f"pytest exit {proc.returncode} (JSON kept): {' | '.join(tail)}")


def _stamp_machine(path: Path) -> None:
    """Add the machine facts a result written by someone else's test lacks (never overwrite)."""
    data = json.loads(path.read_text())
    if not isinstance(data, dict):
        return
    own = data.get("machine") if isinstance(data.get("machine"), dict) else {}
    missing = {k: v for k, v in machine_facts().items() if k not in own}
    if missing:
        data["machine"] = {**own, **missing, "stamped_by_bench_run": sorted(missing)}
        path.write_text(json.dumps(data, indent=2) + "\n")


def _probe(quick: bool) -> None:
    """Probe send lag and CPU (``tests/bench/test_probe_bench.py``)."""
    _pytest_bench("tests/bench/test_probe_bench.py", "probe.json", quick, 420)


def _aggregation(quick: bool) -> None:
    """Aggregation throughput apart from Kafka, local[1] and local[2] (``bench.aggregation``)."""
    from bench.aggregation import run_aggregation

    run_aggregation(quick=quick)


def _e2e(quick: bool) -> None:
    """End to end through Apache Kafka, v1 and v2, local[1] and local[2] (``bench.e2e``)."""
    from bench.e2e import run_e2e

    result = run_e2e(quick=quick)
    failed = {k: r["error"] for k, r in result["runs"].items() if "error" in r}
    if failed:
        raise RuntimeError(f"e2e runs failed (JSON kept): {failed}")


def _sweep(quick: bool) -> None:
    """End to end on the mock by micro-batch size (``bench.e2e --sweep``)."""
    from bench.e2e import run_sweep

    result = run_sweep(quick=quick)
    failed = [c["error"] for c in result["cases"] if "error" in c]
    if failed:
        raise RuntimeError(f"sweep cases failed (JSON kept): {failed}")


def _health(quick: bool) -> None:
    """Freshness and memory of the stream job (``tests/bench/test_stream_freshness_bench.py``)."""
    _pytest_bench("tests/bench/test_stream_freshness_bench.py", "stream_health.json", quick, 480)


def _floor(quick: bool) -> None:
    """The end-to-end floor on the mock and on Tansu, side by side (``bench.floor``)."""
    from bench.floor import run_floor

    result = run_floor(quick=quick)
    failed = {k: r["error"] for k, r in result["runs"].items() if "error" in r}
    if failed:
        raise RuntimeError(f"floor runs failed (JSON kept): {failed}")


def _compare(quick: bool) -> None:
    """Kafka, NATS, Redis and RabbitMQ side by side through the pipeline (``nines compare``)."""
    from monitor.compare import CASES, SYSTEMS, Case, run_compare

    cases = [Case(256, 1000)] if quick else list(CASES)
    run_compare(SYSTEMS, cases, 10.0 if quick else 20.0, RESULTS_DIR)


def _formats(quick: bool) -> None:
    """Echo formats v1/v2: codec, probe CPU at 1,000 msgs/s, and aggregation by format."""
    from bench.aggregation import run_formats
    from bench.echo_formats import main as echo_formats

    echo_formats(["--quick"] if quick else [])
    run_formats(quick=quick)


def _scale(quick: bool) -> None:
    """The aggregation's cost model: rows into Spark, masters, formats (``bench.scale``)."""
    from bench.scale import main as scale

    args = ["--quick", "--sizes", "100000,400000"] if quick else ["--sizes", "100000,1000000"]
    if scale(args) != 0:
        raise RuntimeError("bench.scale failed")


def _stages(quick: bool) -> None:
    """Where a micro-batch's time goes apart from Kafka, and the levers (``bench.stages``)."""
    from bench.stages import main as stages

    if stages(["--levers", *(["--quick"] if quick else [])]) != 0:
        raise RuntimeError("bench.stages failed")


def _flood(quick: bool) -> None:
    """The probe's send lag under a /metrics flood (``tests/bench/test_probe_flood_bench.py``)."""
    _pytest_bench("tests/bench/test_probe_flood_bench.py", "probe_flood.json", quick, 900)


def _pressure(quick: bool) -> None:
    """The probe's CPU under slow, stalled and down brokers (``bench.probe_pressure``)."""
    from bench.probe_pressure import main as pressure

    args = ["--engines", "mock", "--formats", "v2", "--per-broker", "3"] if quick else []
    if pressure(args) != 0 or (not quick and pressure(["--memory"]) != 0):
        raise RuntimeError("bench.probe_pressure failed")


def _fleet(quick: bool) -> None:
    """A probe's CPU and produce requests per broker, 10 to 1,000 brokers (``bench.fleet_cost``),
    and a fleet's rebalance times, classic vs consumer protocol (``bench.fleet_rebalance``)."""
    from bench.fleet_cost import main as fleet_cost
    from bench.fleet_rebalance import main as fleet_rebalance

    if fleet_cost(["--quick"] if quick else []) != 0:
        raise RuntimeError("bench.fleet_cost failed (JSON kept)")
    fleet_rebalance()


RUNNERS: dict[str, Callable[[bool], None]] = {
    "accuracy": _accuracy,
    "co": _co,
    "probe": _probe,
    "e2e": _e2e,
    "sweep": _sweep,
    "health": _health,
    "aggregation": _aggregation,
    "floor": _floor,
    "formats": _formats,
    "compare": _compare,
    "scale": _scale,
    "stages": _stages,
    "pressure": _pressure,
    "flood": _flood,
    "fleet": _fleet,
}


def run(parts: list[str], quick: bool) -> dict[str, Any]:
    """Run the parts in order, record each one's status and wall time, write ``run.json``."""
    started = time.perf_counter()
    status: dict[str, Any] = {}
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    for part in parts:
        t0 = time.perf_counter()
        print(f"bench: {part} ...", flush=True)
        try:
            RUNNERS[part](quick)
            status[part] = {"status": "ok"}
        except PartSkipped as exc:
            status[part] = {"status": "skipped", "reason": str(exc)}
        except Exception as exc:
            traceback.print_exc()
            status[part] = {"status": "failed", "reason": f"{type(exc).__name__}: {exc}"[:300]}
        status[part]["wall_s"] = round(time.perf_counter() - t0, 1)
        status[part]["finished"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        print(f"bench: {part} {status[part]['status']} in {status[part]['wall_s']} s", flush=True)
    previous = RESULTS_DIR / "run.json"
    if previous.exists() and len(parts) < len(PARTS):
        old = json.loads(previous.read_text()).get("parts", {})
        status = {**{k: v for k, v in old.items() if k not in status}, **status}
    summary = {
        "machine": machine_facts(),
        "argv": ["python", "-m", "bench.run", *sys.argv[1:]],
        "quick": quick,
        "parts": {p: status[p] for p in PARTS if p in status},
        "wall_s": round(time.perf_counter() - started, 1),
    }
    previous.write_text(json.dumps(summary, indent=2) + "\n")
    return summary


def main(argv: list[str] | None = None) -> int:
    """CLI entry: ``[--quick] [--only a,b] [--report-only]``."""
    ap = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__)
    ap.add_argument("--quick", action="store_true", help="smaller runs, for a smoke test")
    ap.add_argument("--only", default=",".join(PARTS), help=f"comma list of {', '.join(PARTS)}")
    ap.add_argument("--report-only", action="store_true", help="regenerate docs from the JSON")
    args = ap.parse_args(argv)
    parts = [p.strip() for p in args.only.split(",") if p.strip()]
    unknown = [p for p in parts if p not in RUNNERS]
    if unknown:
        ap.error(f"--only: unknown part(s) {', '.join(unknown)}; choose from {', '.join(PARTS)}")
    if not args.report_only:
        summary = run(parts, args.quick)
        print(f"bench: total {summary['wall_s']} s", flush=True)
    from bench.report import main as report_main

    report_main()
    return 0


if __name__ == "__main__":
    sys.exit(main())
