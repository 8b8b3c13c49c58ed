"""Aggregation throughput of the stream job apart from Kafka, on local[1] and local[2].

The echoes are generated once (vectorised, seeded) as the Kafka source's parsed rows and written
to an Arrow file; the real ``StreamJob`` (event time, HDR bucket expression, one stateful
aggregation for every resolution and kind, foreachBatch to histograms and the exporter) replays
them through ``bench.replay`` in one fresh process per master, one fixed slice per
micro-batch. The first batch (code generation, Python workers) is reported apart. Every echo must
come out of the closed windows: the run fails otherwise. The baseline is the pure-Python
``hdrh`` record loop on the same values, timed in the same run.
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

from bench.machine import write_result

#: Windows of the default configuration; three latency kinds per echo.
WINDOWS = {"10s": 10_000_000, "1m": 60_000_000, "1h": 3_600_000_000}
KINDS = 3
PROBE_PARTITIONS = 3
#: Event time each micro-batch covers: a batch of 1M echoes is a 50,000/s probe fleet's 20 s.
BATCH_SPAN_US = 20_000_000
HIGHEST_US = 3_600_000_000


def generate(n: int, t0_us: int, seed: int = 7) -> pa.Table:
    """Parsed echoes in event-time order: lognormal latencies, rare multi-second stalls, losses."""
    from streaming.source import SOURCE_SCHEMA

    rng = np.random.default_rng(seed)
    intended = t0_us + np.arange(n, dtype=np.int64) * BATCH_SPAN_US // 1_000_000
    lat = rng.lognormal(8.5, 1.0, n).astype(np.int64) + 1
    stall = rng.random(n) < 0.001
    lat[stall] = rng.integers(1_000_000, 5_000_000, int(stall.sum()))
    lost = rng.random(n) < 0.001
    received = np.where(lost, 0, intended + lat)
    cols: dict[str, pa.Array] = {
        "rtype": pa.array(np.full(n, "echo")),
        "reason": pa.nulls(n, pa.string()),
        "cluster": pa.array(np.full(n, "bench")),
        "topic": pa.array(np.full(n, "nines.probe")),
        "partition": pa.array(np.arange(n, dtype=np.int64) % PROBE_PARTITIONS),
        "leader": pa.array(np.arange(n, dtype=np.int64) % PROBE_PARTITIONS % 3 + 1),
        "intended_us": pa.array(intended),
        "sent_us": pa.array(intended + 30),
        "acked_us": pa.array(intended + lat // 2),
        "received_us": pa.array(received, mask=lost),
        "lost": pa.array(lost),
        "timeout_us": pa.array(np.full(n, 30_000_000), mask=~lost),
        "max_us": pa.nulls(n, pa.int64()),
        "event_us": pa.array(intended),
        "n": pa.array(np.ones(n, np.int64)),
    }
    return pa.Table.from_arrays([cols[f.name] for f in SOURCE_SCHEMA], schema=SOURCE_SCHEMA)


def closing_echo(t_us: int) -> pa.Table:
    """One echo far ahead: the watermark passes every window, 1h included, so all close."""
    table = generate(1, t_us)
    return table.set_column(table.schema.get_field_index("cluster"), "cluster", pa.array(["end"]))


def hdrh_seconds(table: pa.Table, limit: int) -> tuple[float, int]:
    """Seconds for the pure-Python loop to record ``limit`` echoes' values like the job's groups."""
    from hdrh.histogram import HdrHistogram

    t = table.slice(0, limit)
    intended = t["intended_us"].to_numpy()
    part = t["partition"].to_numpy()
    lost = t["lost"].to_numpy(zero_copy_only=False)
    e2e = np.where(lost, 30_000_000, t["received_us"].fill_null(0).to_numpy() - intended)
    values = {
        "e2e": e2e.tolist(),
        "publish": (t["acked_us"].to_numpy() - intended).tolist(),
        "send_lag": (t["sent_us"].to_numpy() - intended).tolist(),
    }
    intended_l, part_l = intended.tolist(), part.tolist()
    hists: dict[tuple[str, int, int, str], Any] = {}
    started = time.perf_counter()
    for i in range(len(intended_l)):
        for kind, vals in values.items():
            v = min(vals[i], HIGHEST_US)
            for res, span in WINDOWS.items():
                key = (res, intended_l[i] // span, part_l[i], kind)
                h = hists.get(key)
                if h is None:
                    h = hists[key] = HdrHistogram(1, HIGHEST_US, 3)
                h.record_value(v)
    return time.perf_counter() - started, len(intended_l)


def run_worker(path: str, master: str, rows_per_batch: int, expected: int) -> dict[str, Any]:
    """In this process: replay the file through a ``StreamJob`` on ``master``; timings as JSON."""
    from bench.replay import ReplayDataSource
    from monitor.pipeline import StreamPipeline
    from streaming.config import StreamConfig
    from streaming.job import spark_session

    cores = int(master.removeprefix("local[").removesuffix("]"))
    config = StreamConfig.model_validate(
        {
            "bootstrap": "replay:0",
            "windows": "10s,1m,1h",
            "watermark": "2m",
            "trigger": "0.5s",
            "metrics_port": 0,
            "master": master,
            "shuffle_partitions": cores,
            "state_store": os.environ.get("NINES_STATE_STORE", "rocksdb"),
        }
    )
    spark = spark_session(config)
    spark.dataSource.register(ReplayDataSource)
    counted = {"e2e": 0}

    def on_batch(batch_id: int, windows: list[Any], counters: Any) -> None:
        for w in windows:
            if w.resolution == "10s" and w.series.kind == "e2e" and w.series.partition != "all":
                counted["e2e"] += w.hist.total

    def source(session: Any) -> Any:
        return (
            session.readStream.format("nines-replay")
            .option("path", path)
            .option("rowsPerBatch", str(rows_per_batch))
            .option("splits", str(cores))
            .option("windows", config.spec.to_option())
            .option("hdr", config.layout.to_option())
            .load()
        )

    job = StreamPipeline(config, spark=spark, on_batch=on_batch, source=source)
    started = time.perf_counter()
    job.start(serve=False)
    try:
        job.process_all_available()
        wall_s = time.perf_counter() - started
        progress = [p for p in job.query.recentProgress if p["numInputRows"] > 0]
    finally:
        job.stop()
        spark.stop()
    if counted["e2e"] != expected:
        raise RuntimeError(f"{master}: {counted['e2e']} e2e samples out of {expected} echoes")
    busy = [p["durationMs"]["triggerExecution"] / 1000 for p in progress]
    rows = [p["numInputRows"] for p in progress]
    measured_rows, measured_s = sum(rows[1:-1]), sum(busy[1:-1])  # not the cold or closing batch
    state = [op.get("numRowsTotal", 0) for p in progress for op in p.get("stateOperators", [])]
    return {
        "master": master,
        "echoes": sum(rows),
        "batches": len(progress),
        "rows_per_batch": rows_per_batch,
        "echoes_per_s": round(measured_rows / measured_s) if measured_s else None,
        "batch_busy_s": [round(b, 2) for b in busy],
        "cold_batch_s": round(busy[0], 2),
        "wall_s_incl_start": round(wall_s, 2),
        "max_state_rows": max(state, default=0),
        "e2e_samples_counted": counted["e2e"],
    }


def run_aggregation(quick: bool = False) -> dict[str, Any]:
    """Generate, replay on local[1] and local[2] in fresh processes, write ``aggregation.json``."""
    from bench.replay import write_replay_file

    batches, rows_per_batch = (4, 300_000) if quick else (6, 1_000_000)
    n = batches * rows_per_batch
    t0 = (int(time.time()) // 3600 * 3600 - 6 * 3600) * 1_000_000
    table = generate(n, t0)
    end_us = int(table["intended_us"][-1].as_py()) + 4 * HIGHEST_US
    table = pa.concat_tables([table, closing_echo(end_us)])
    baseline_s, baseline_n = hdrh_seconds(table, 100_000 if quick else 300_000)
    hdrh_per_s = baseline_n / baseline_s
    runs = {}
    with tempfile.TemporaryDirectory(prefix="nines-agg-") as tmp:
        path = str(Path(tmp) / "echoes.arrow")
        write_replay_file(path, table)
        for master in ("local[1]", "local[2]"):
            cmd = [sys.executable, "-m", "bench.aggregation", "--worker", path, master]
            cmd += [str(rows_per_batch), str(n)]
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900, check=False)
            lines = [x for x in proc.stdout.splitlines() if x.startswith("{")]
            if proc.returncode != 0 or not lines:
                raise RuntimeError(f"{master}: exit {proc.returncode}: {proc.stderr[-600:]}")
            runs[master] = json.loads(lines[-1])
    one, two = runs["local[1]"]["echoes_per_s"], runs["local[2]"]["echoes_per_s"]
    payload = {
        "benchmark": "aggregation",
        "quick": quick,
        "setup": (
            f"{n:,} pre-generated echoes (+1 that closes every window) replayed from an Arrow file "
            f"through the real StreamJob, {rows_per_batch:,} per micro-batch; windows "
            f"{', '.join(WINDOWS)}; {KINDS} latency kinds per echo; one fresh process per master. "
            "echoes/s = echoes of the steady batches / their trigger time (first and closing "
            "batch excluded)."
        ),
        "runs": runs,
        "scaling_local2_over_local1": round(two / one, 2) if one and two else None,
        "hdrh_python_loop": {
            "echoes": baseline_n,
            "seconds": round(baseline_s, 2),
            "echoes_per_s": round(hdrh_per_s),
            "record_calls_per_echo": KINDS * len(WINDOWS),
        },
        "spark_local2_vs_hdrh_ratio": round(two / hdrh_per_s, 1) if two else None,
        "target_echoes_per_s": 1_000_000,
    }
    write_result("aggregation", payload)
    return payload


def main(argv: list[str] | None = None) -> int:
    """``--worker PATH MASTER ROWS EXPECTED`` runs one replay; otherwise the whole part."""
    ap = argparse.ArgumentParser(prog="python -m bench.aggregation", description=__doc__)
    ap.add_argument("--worker", nargs=4, metavar=("PATH", "MASTER", "ROWS", "EXPECTED"))
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args(argv)
    if args.worker:
        path, master, rows, expected = args.worker
        print(json.dumps(run_worker(path, master, int(rows), int(expected))), flush=True)
        return 0
    print(json.dumps(run_aggregation(args.quick), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
