"""How the stream job's aggregation scales: the cost model of state format 2 (issue 24).

* ``rows``: rows into Spark per micro-batch as a function of echoes, series and read tasks: the
  combiner's output (one histogram per finest window, series and kind, per task), computed
  without Spark, against the rows per bucket of state format 1.
* ``spark``: echoes/s apart from Kafka by echo format (parsed rows, v1, v2), master (local[1],
  local[2], a standalone master with two 1-core workers) and batch size, with the rows into
  Spark, the state rows, and the job's CPU per echo (whole process tree) on the steady batches.
* ``fixed``: the fixed cost of a micro-batch (tiny batches) and the job's CPU at live rates
  (1 k, 10 k, 100 k echoes/s with the default 5 s trigger), from the same replays.

Every number carries the 1-minute load average at its end: this machine is shared.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from bench import aggregation as agg
from bench.machine import RESULTS_DIR, write_result


def rows_into_spark(echoes: int, series: int, tasks: int, span_s: float) -> dict[str, Any]:
    """The combiner's rows for ``echoes`` over ``series`` partitions and ``span_s`` of event
    time, read by ``tasks`` tasks (each its share), against format 1's rows per bucket."""
    from core.hdr import HdrLayout
    from core.windows import WindowSpec
    from streaming.combine import Combiner, combine

    saved = agg.PROBE_PARTITIONS, agg.BATCH_SPAN_US
    agg.PROBE_PARTITIONS, agg.BATCH_SPAN_US = series, int(span_s * 1e6 * 1_000_000 / echoes)
    try:
        table = agg.generate(echoes, 1_800_000_000_000_000 // 3_600_000_000 * 3_600_000_000)
    finally:
        agg.PROBE_PARTITIONS, agg.BATCH_SPAN_US = saved
    spec, layout = WindowSpec.from_names("10s,1m,1h"), HdrLayout(1, agg.HIGHEST_US, 3)
    rows, bucket_rows = 0, 0
    started = time.perf_counter()
    for k in range(tasks):
        part = table.take(np.arange(k, echoes, tasks))  # each task sees every window
        c = Combiner(spec, layout)
        out = [b for chunk in part.to_batches(max_chunksize=10_000) for b in c.add(chunk)]
        rows += sum(b.num_rows for b in [*out, *c.finish()])
        finest = combine(part, spec, layout).num_rows  # format 1 had these per resolution
        bucket_rows += finest
    return {
        "echoes": echoes,
        "series": series,
        "tasks": tasks,
        "event_span_s": span_s,
        "rows_into_spark": rows,
        "rows_per_echo": round(rows / echoes, 4),
        "finest_bucket_rows_format1": bucket_rows,
        "combine_s": round(time.perf_counter() - started, 2),
        "load_avg_1m": round(os.getloadavg()[0], 2),
    }


def run_rows(quick: bool) -> list[dict[str, Any]]:
    """The rows table: echoes × series × tasks (160 s of event time a batch, as issue 24's run)."""
    out = []
    for echoes in (100_000, 400_000) if quick else (100_000, 400_000, 1_000_000):
        for series in (3, 12, 100):
            for tasks in (1, 2):
                out.append(rows_into_spark(echoes, series, tasks, 160.0))
                print(json.dumps(out[-1]), flush=True)
    return out


def replay(
    path: str,
    master: str,
    rows: int,
    expected: int,
    fmt: str,
    trigger: str = "0.5s",
    confs: dict[str, str] | None = None,
) -> dict[str, Any]:
    """One ``bench.aggregation`` worker in a fresh process; its JSON."""
    cmd = [sys.executable, "-m", "bench.aggregation", "--worker", path, master, str(rows)]
    cmd += [str(expected), "--format", fmt, "--trigger", trigger]
    for k, v in (confs or {}).items():
        cmd += ["--conf", f"{k}={v}"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=3600, check=False)
    lines = [x for x in proc.stdout.splitlines() if x.startswith("{")]
    if proc.returncode != 0 or not lines:
        # the first error line names the cause; a query's plan after it can run for pages
        errors = [x for x in proc.stderr.splitlines() if "Error" in x or "Exception" in x]
        raise RuntimeError(
            f"{master} {fmt}: exit {proc.returncode}: {errors[:3]} ... {proc.stderr[-800:]}"
        )
    result: dict[str, Any] = json.loads(lines[-1])
    print(json.dumps(result), flush=True)
    return result


def _files(tmp: str, n: int, formats: tuple[str, ...] = ("v1", "v2")) -> tuple[dict[str, str], int]:
    from bench.replay import write_replay_file

    t0 = (int(time.time()) // 3600 * 3600 - 6 * 3600) * 1_000_000
    table = agg.generate(n, t0)
    end_us = int(table["intended_us"][-1].as_py()) + 4 * agg.HIGHEST_US
    table = pa.concat_tables([table, agg.closing_echo(end_us)])
    paths = {"parsed": str(Path(tmp) / "parsed.arrow")}
    write_replay_file(paths["parsed"], table)
    for fmt in formats:
        if fmt == "parsed":
            continue
        values = agg.raw_values(table, fmt)
        paths[fmt] = str(Path(tmp) / f"{fmt}.arrow")
        with pa.OSFile(paths[fmt], "wb") as sink, pa.ipc.new_file(sink, values.schema) as w:
            w.write_table(values, max_chunksize=100_000)
    return paths, n


def run_spark(quick: bool, masters: list[str], formats: list[str], sizes: list[int]) -> list[Any]:
    """Replays by format × master × batch size (echoes per batch); 5 steady batches each."""
    runs = []
    n = max(sizes) * 7
    with tempfile.TemporaryDirectory(prefix="nines-scale-") as tmp:
        paths, n = _files(tmp, n, tuple(formats))
        for fmt in formats:
            for master in masters:
                for size in sizes:
                    rows = size // agg.V2_BATCH if fmt == "v2" else size
                    r = replay(paths[fmt], master, rows, n, fmt)
                    r["echoes_per_batch"] = size
                    runs.append(r)
    return runs


def run_fixed(quick: bool) -> dict[str, Any]:
    """Tiny batches: the fixed cost of a micro-batch, and CPU per second at live rates."""
    with tempfile.TemporaryDirectory(prefix="nines-fixed-") as tmp:
        paths, n = _files(tmp, 7_500 * 8, ("v2",))
        small = replay(paths["v2"], "local[2]", 5, n, "v2")  # 500 echoes a batch
        live = replay(paths["v2"], "local[2]", 75, n, "v2")  # 1,500/s × 5 s
    busy = small["batch_busy_s"][1:-1]
    fixed_s = sorted(busy)[len(busy) // 2] if busy else None
    per_echo_us = live["job_cpu_us_per_echo"]
    cpu_per_batch = (live["job_cpu_s_steady"] or 0) / max(len(live["batch_busy_s"][1:-1]), 1)
    return {
        "fixed_batch_s_median": fixed_s,
        "small_batch": small,
        "live_1500_per_s_batch": live,
        "job_cpu_core_share_at_1500_per_s_5s_trigger": round(cpu_per_batch / 5.0, 3),
        "job_cpu_us_per_echo_at_7500_per_batch": per_echo_us,
    }


#: Live rates (echoes/s) of the ``live`` part, the job's default trigger, batches measured.
LIVE_RATES = (1_000, 1_500, 10_000, 100_000)  # 1,500: issue 24's target rate
LIVE_TRIGGER_S = 5.0
LIVE_WARM_BATCHES, LIVE_BATCHES = 3, 5
#: Both fixed-cost levers of ``bench.stages`` at once (part ``live_levers``).
LIVE_LEVERS = {
    "spark.sql.streaming.stateStore.providerClass": (
        "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"
    ),
    "spark.sql.shuffle.partitions": "1",
}


def run_live(
    quick: bool, confs: dict[str, str] | None = None, rates: tuple[int, ...] = LIVE_RATES
) -> list[dict[str, Any]]:
    """The job's CPU at live rates: v2 echoes of 12 series replayed a trigger's worth per batch
    with the default 5 s trigger, their event time advancing as fast as the wall clock (so
    windows close as they would live); CPU of the whole job (driver, JVM, Python workers) over
    the batches after the warm-up ones, per second of wall time."""
    out = []
    for rate in rates[:2] if quick else rates:  # quick: 1,000 and 1,500
        per_batch = int(rate * LIVE_TRIGGER_S)
        n = per_batch * (LIVE_WARM_BATCHES + LIVE_BATCHES + 1)
        saved = agg.PROBE_PARTITIONS, agg.BATCH_SPAN_US
        agg.PROBE_PARTITIONS, agg.BATCH_SPAN_US = 12, int(1e12 / rate)  # 1M echoes' span
        try:
            with tempfile.TemporaryDirectory(prefix="nines-live-") as tmp:
                paths, n = _files(tmp, n, ("v2",))
                r = replay(
                    paths["v2"], "local[2]", per_batch // agg.V2_BATCH, n, "v2",
                    trigger=f"{LIVE_TRIGGER_S:g}s", confs=confs,
                )  # fmt: skip
        finally:
            agg.PROBE_PARTITIONS, agg.BATCH_SPAN_US = saved
        cpu, wall = r["cpu_at_batch_s"], r["wall_at_batch_s"]
        a, b = LIVE_WARM_BATCHES, len(cpu) - 2  # not the closing batch
        cpu_s, wall_s = cpu[b] - cpu[a], wall[b] - wall[a]
        echoes = (b - a) * per_batch
        out.append(
            {
                "echoes_per_s": rate,
                "trigger_s": LIVE_TRIGGER_S,
                "echoes_per_batch": per_batch,
                "batches_measured": b - a,
                "job_cpu_s": round(cpu_s, 2),
                "wall_s": round(wall_s, 2),
                "job_cpu_core_share": round(cpu_s / wall_s, 3) if wall_s else None,
                "job_cpu_us_per_echo": round(cpu_s / echoes * 1e6, 2) if echoes else None,
                "job_cpu_s_per_batch": round(cpu_s / (b - a), 3) if b > a else None,
                "batch_busy_s": r["batch_busy_s"],
                "confs": confs or {},
                "load_avg_1m_end": r["load_avg_1m_end"],
            }
        )
        print(json.dumps(out[-1]), flush=True)
    return out


def main(argv: list[str] | None = None) -> int:
    """``python -m bench.scale [--quick] [--only rows,spark,fixed]``: writes ``scale.json``."""
    ap = argparse.ArgumentParser(prog="python -m bench.scale", description=__doc__)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", default="rows,spark,fixed,live")
    ap.add_argument("--masters", default="local[1],local[2],standalone")
    ap.add_argument("--formats", default="parsed,v1,v2")
    ap.add_argument("--sizes", default="100000,1000000", help="echoes per micro-batch")
    args = ap.parse_args(argv)
    parts = set(args.only.split(","))
    payload: dict[str, Any] = {"benchmark": "scale", "quick": args.quick, "state_format": 2}
    previous = RESULTS_DIR / "scale.json"
    if previous.exists():  # keep the parts not run now (each carries its own load figures)
        old = json.loads(previous.read_text())
        keep = ("rows", "spark", "fixed", "live", "live_levers")
        payload |= {k: old[k] for k in keep if k in old}
    if "rows" in parts:
        payload["rows"] = run_rows(args.quick)
    if "spark" in parts:
        fresh = run_spark(
            args.quick,
            args.masters.split(","),
            args.formats.split(","),
            [int(x) for x in args.sizes.split(",")],
        )
        stamp = time.strftime("%Y-%m-%dT%H:%MZ", time.gmtime())

        def case(r: dict[str, Any]) -> tuple[Any, ...]:
            master = "standalone" if str(r.get("master")).startswith("spark://") else r["master"]
            return r.get("echo_format"), master, r.get("echoes_per_batch")

        done = {case(r) for r in fresh}  # earlier runs of the cases not re-run stay
        kept = [r for r in payload.get("spark", []) if case(r) not in done]
        payload["spark"] = [*kept, *({**r, "run": stamp} for r in fresh)]
    if "fixed" in parts:
        payload["fixed"] = run_fixed(args.quick)
    if "live" in parts:
        payload["live"] = run_live(args.quick)
    if "live_levers" in parts:  # the fixed-cost levers of bench.stages, at live rates
        payload["live_levers"] = run_live(args.quick, LIVE_LEVERS, (1_000, 10_000))
    write_result("scale", payload)
    print(json.dumps({k: v for k, v in payload.items() if k != "spark"}, indent=2)[:4000])
    return 0


if __name__ == "__main__":
    sys.exit(main())
