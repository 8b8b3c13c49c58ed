"""Where a micro-batch's time goes, stage by stage, apart from Kafka (issue 24), and the levers
tried on it.

``python -m bench.stages [--quick] [--levers]`` replays v2 echoes (``bench.aggregation``'s
worker: 12 series, windows 10s/1m/1h, local[2]) at two batch sizes: ``FIXED_ECHOES`` a batch
(the fixed cost of a micro-batch) and ``LARGE_ECHOES`` (throughput). Per batch it keeps
Spark's own phases (``query.lastProgress.durationMs``: latestOffset, queryPlanning, walCommit,
addBatch, commitOffsets), the state operators' update/removal/commit times, the batch's
execution (``df.toArrow()``: read tasks, shuffles, state) apart from the sink, and the read
tasks' own stages (values out of the file, parse, combine), timed inside ``read()``. With
``--py-spy`` the Python workers are sampled too (``py-spy record --subprocesses``; the top
functions by own time). ``--levers`` replays the fixed-cost case once per lever (Spark SQL
settings), back to back with the baseline. Writes ``bench/results/stages.json``; every figure
carries the load average at its end: this machine is shared.
"""

from __future__ import annotations

import argparse
import json
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from bench import aggregation as agg
from bench.machine import RESULTS_DIR, write_result
from bench.procstat import descendants

SERIES = 12
MASTER = "local[2]"
#: Echoes per micro-batch of the two cases, and batches of each (the first few are warm-up).
FIXED_ECHOES, FIXED_BATCHES = 500, 30
LARGE_ECHOES, LARGE_BATCHES = 400_000, 8
#: Batches at the start left out of the medians: the JVM's JIT and the Python workers warm up
#: over several (the first takes 20-40 s, the next few seconds each, measured).
WARM_BATCHES = 3
#: Settings tried on the fixed cost, each against the same baseline, back to back: Spark SQL
#: confs, and ``agg.JVM_CONF`` for the job's ``jvm_options`` (set before the JVM starts).
LEVERS: dict[str, dict[str, str]] = {
    "baseline (the job's defaults: RocksDB, C1 JIT, FileSystem checkpoint manager, no codegen)": {},
    "C2 JIT too (the JVM's default tiers; the job's default before issue 24's fixed-cost work)": {
        agg.JVM_CONF: ""
    },
    "FileContext checkpoint manager (Spark's default; the job's before)": {
        "spark.sql.streaming.checkpointFileManagerClass": (
            "org.apache.spark.sql.execution.streaming.checkpointing."
            "FileContextBasedCheckpointFileManager"
        )
    },
    "code generation (Spark's default; the job's before)": {
        "spark.sql.codegen.wholeStage": "true",
        "spark.sql.codegen.factoryMode": "FALLBACK",
    },
    "the job before issue 24's fixed-cost work (all three of the above)": {
        agg.JVM_CONF: "",
        "spark.sql.streaming.checkpointFileManagerClass": (
            "org.apache.spark.sql.execution.streaming.checkpointing."
            "FileContextBasedCheckpointFileManager"
        ),
        "spark.sql.codegen.wholeStage": "true",
        "spark.sql.codegen.factoryMode": "FALLBACK",
    },
    "in-memory state store": {
        "spark.sql.streaming.stateStore.providerClass": (
            "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"
        )
    },
    "1 shuffle partition": {"spark.sql.shuffle.partitions": "1"},
}


def _files(tmp: str, n: int) -> str:
    """The v2 replay file of ``n`` echoes over ``SERIES`` series (+1 closing echo)."""
    import pyarrow as pa

    t0 = (int(time.time()) // 3600 * 3600 - 6 * 3600) * 1_000_000
    saved, agg.PROBE_PARTITIONS = agg.PROBE_PARTITIONS, SERIES
    try:
        table = agg.generate(n, t0)
        end_us = int(table["intended_us"][-1].as_py()) + 4 * agg.HIGHEST_US
        table = pa.concat_tables([table, agg.closing_echo(end_us)])
        values = agg.raw_values(table, "v2")
    finally:
        agg.PROBE_PARTITIONS = saved
    path = str(Path(tmp) / f"v2-{n}.arrow")
    with pa.OSFile(path, "wb") as sink, pa.ipc.new_file(sink, values.schema) as w:
        w.write_table(values, max_chunksize=100_000)
    return path


def _daemon(root: int) -> int | None:
    """The pyspark.daemon under ``root`` that forks the read tasks' workers (``pyspark.worker``;
    the data source's lookup and planning daemons are others), once it runs."""
    for pid in descendants([root]):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"pyspark.daemon" in cmd and b"pyspark.worker" in cmd:
            return pid
    return None


def replay(
    path: str, echoes_per_batch: int, expected: int, confs: dict[str, str], py_spy: bool = False
) -> dict[str, Any]:
    """One ``bench.aggregation`` worker (v2, ``MASTER``) in a fresh process; its JSON, plus the
    py-spy top functions of its Python workers when asked."""
    rows = max(1, echoes_per_batch // agg.V2_BATCH)
    cmd = [sys.executable, "-m", "bench.aggregation", "--worker", path, MASTER, str(rows)]
    cmd += [str(expected), "--format", "v2"]
    for k, v in confs.items():
        cmd += ["--conf", f"{k}={v}"]
    with tempfile.TemporaryDirectory(prefix="nines-stages-") as tmp:
        out, err = Path(tmp) / "out", Path(tmp) / "err"
        with out.open("w") as fo, err.open("w") as fe:
            proc = subprocess.Popen(cmd, stdout=fo, stderr=fe)
            spy = None
            if py_spy:
                daemon = None
                while daemon is None and proc.poll() is None:
                    time.sleep(0.5)
                    daemon = _daemon(proc.pid)
                if daemon is not None:
                    raw = Path(tmp) / "spy.txt"
                    spy = subprocess.Popen(
                        [_py_spy(), "record", "--pid", str(daemon), "--subprocesses", "--rate",
                         "50", "--format", "raw", "--output", str(raw), "--nonblocking"],
                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                    )  # fmt: skip
            code = proc.wait(timeout=3600)
            top = None
            if spy is not None:
                spy.send_signal(signal.SIGINT)
                spy.wait(timeout=60)
                top = _top_functions(Path(tmp) / "spy.txt")
        lines = [x for x in out.read_text().splitlines() if x.startswith("{")]
        if code != 0 or not lines:
            raise RuntimeError(f"replay: exit {code}: {err.read_text()[-800:]}")
    result: dict[str, Any] = json.loads(lines[-1])
    if top is not None:
        result["py_spy_top"] = top
        result["py_spy_process"] = "pyspark.daemon pyspark.worker (the read tasks' workers)"
    return result


def _py_spy() -> str:
    """py-spy beside this interpreter (``pip install py-spy``), else the one on PATH."""
    beside = Path(sys.executable).parent / "py-spy"
    return str(beside) if beside.exists() else "py-spy"


def _top_functions(raw: Path, n: int = 15) -> list[dict[str, Any]]:
    """Own-time share of the most sampled functions in py-spy's collapsed stacks."""
    own: Counter[str] = Counter()
    total = 0
    if not raw.exists():
        return []
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        frame = stack.split(";")[-1]
        own[frame] += int(count)
        total += int(count)
    return [{"function": f, "share": round(c / total, 4)} for f, c in own.most_common(n)]


def breakdown(run: dict[str, Any]) -> dict[str, Any]:
    """Medians per batch over the steady batches (not the warm-up ones, nor the closing one)."""
    batches = len(run["duration_ms"])
    keep = list(range(min(WARM_BATCHES, batches - 2), batches - 1))

    def med(values: list[float]) -> float:
        return round(statistics.median(values), 4) if values else 0.0

    d = [run["duration_ms"][i] for i in keep]
    phases = {k: med([x.get(k, 0) / 1000 for x in d]) for k in sorted({k for x in d for k in x})}
    ops = [run["state_operators"][i] for i in keep]
    state = {}
    for j in range(max((len(o) for o in ops), default=0)):
        for key in ("allUpdatesTimeMs", "allRemovalsTimeMs", "commitTimeMs"):
            state[f"op{j}_{key}"] = med([o[j].get(key, 0) / 1000 for o in ops if len(o) > j])
    sinks = run.get("sinks", [])
    sink_keep = sinks[min(WARM_BATCHES, max(len(sinks) - 2, 0)) : -1] or sinks
    tasks = sorted(run.get("read_tasks", []), key=lambda t: t["start"])
    per_batch = max(1, round(len(tasks) / max(batches, 1)))
    task_keep = tasks[WARM_BATCHES * per_batch : -1] or tasks
    cores = int(MASTER.removeprefix("local[").removesuffix("]"))
    busy = [run["batch_busy_s"][i] for i in keep]
    roles = run.get("cpu_by_role_at_batch_s") or []
    names = sorted({k for r in roles for k in r})
    cpu_roles = {
        k: med([roles[i].get(k, 0) - roles[i - 1].get(k, 0) for i in keep if 0 < i < len(roles)])
        for k in names
    }
    return {
        "echoes_per_batch": run["echoes_per_batch"],
        "batches_measured": len(keep),
        "batch_s_median": med(busy),
        "echoes_per_s_median_batch": round(run["echoes_per_batch"] / med(busy)) if busy else None,
        "spark_phases_s": phases,
        "execute_s": med([s["execute_s"] for s in sink_keep]),
        "sink_s": med([s["sink_s"] for s in sink_keep]),
        "state_task_s": state,
        # read tasks: seconds each (they run ``cores`` at a time)
        "read_task_s": {
            k: med([t[k] for t in task_keep]) for k in ("read_s", "parse_s", "combine_s", "task_s")
        },
        "read_tasks_per_batch": per_batch,
        "cores": cores,
        "partials_per_batch": med([float(x) for x in run["partials_per_batch"][1:-1]]),
        "state_rows_max": run["max_state_rows"],
        "job_cpu_s_per_batch": round(run["job_cpu_s_steady"] / max(batches - 2, 1), 3)
        if run.get("job_cpu_s_steady")
        else None,
        # the job's CPU per batch by process (driver, JVM, planner, Python workers)
        "job_cpu_s_per_batch_by_process": cpu_roles,
        "cold_batch_s": run["cold_batch_s"],
        "first_batches_s": run["batch_busy_s"][:WARM_BATCHES],
        "load_avg_1m_end": run["load_avg_1m_end"],
        "confs": run.get("confs", {}),
        "py_spy_top": run.get("py_spy_top"),
        "py_spy_process": run.get("py_spy_process"),
    }


def main(argv: list[str] | None = None) -> int:
    """``python -m bench.stages [--quick] [--levers] [--py-spy] [--only fixed,large]``."""
    ap = argparse.ArgumentParser(prog="python -m bench.stages", description=__doc__)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--levers", action="store_true", help="the fixed case once per lever")
    ap.add_argument("--py-spy", action="store_true", help="sample the Python workers")
    ap.add_argument("--only", default="fixed,large")
    args = ap.parse_args(argv)
    parts = set(args.only.split(","))
    payload: dict[str, Any] = {
        "benchmark": "stages",
        "command": "python -m bench.stages" + (" --levers" if args.levers else ""),
        "setup": (
            f"v2 echoes of {SERIES} series (batches of {agg.V2_BATCH}) replayed from an Arrow "
            f"file through the real StreamPipeline on {MASTER} (bench.aggregation's worker, 2 "
            "shuffle partitions, windows 10s/1m/1h, RocksDB state, trigger 0.5 s, the job's "
            "Spark settings: C1 JIT, FileSystem checkpoint manager, no code generation), the "
            "values parsed and combined in the read tasks as the Kafka source does. Medians per "
            f"batch over the batches after the first {WARM_BATCHES} (warm-up) and before the "
            "closing one."
        ),
        "warm_batches": WARM_BATCHES,
    }
    previous = RESULTS_DIR / "stages.json"
    if previous.exists():  # keep the parts not run now
        old = json.loads(previous.read_text())
        payload |= {k: old[k] for k in ("cases", "levers") if k in old}
    cases = dict(payload.get("cases", {}))
    with tempfile.TemporaryDirectory(prefix="nines-stages-") as tmp:
        if "fixed" in parts or args.levers:
            n_fixed = FIXED_ECHOES * FIXED_BATCHES // (2 if args.quick else 1)
            fixed = _files(tmp, n_fixed)
        if "fixed" in parts:
            run = replay(fixed, FIXED_ECHOES, n_fixed, {}, args.py_spy)
            cases["fixed"] = breakdown(run) | {"echoes": n_fixed}
            print(json.dumps(cases["fixed"]), flush=True)
        if "large" in parts:
            large_batches = 4 if args.quick else LARGE_BATCHES
            n = LARGE_ECHOES * large_batches
            large = _files(tmp, n)
            run = replay(large, LARGE_ECHOES, n, {}, args.py_spy)
            cases["large"] = breakdown(run) | {"echoes": n}
            print(json.dumps(cases["large"]), flush=True)
        if args.levers:
            levers = []
            for name, confs in LEVERS.items():
                run = replay(fixed, FIXED_ECHOES, n_fixed, confs)
                levers.append({"lever": name} | breakdown(run))
                print(json.dumps(levers[-1]), flush=True)
            payload["levers"] = levers
    payload["cases"] = cases
    write_result("stages", payload)
    return 0


if __name__ == "__main__":
    sys.exit(main())
