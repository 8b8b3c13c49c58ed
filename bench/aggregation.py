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
from streaming.consume import FETCH_BATCH
from testkit.spark import process_all_available

#: Windows of the default configuration; three latency kinds per echo.
WINDOWS = {"10s": 10_000_000, "1m": 60_000_000, "1h": 3_600_000_000}
KINDS = 3
PROBE_PARTITIONS = 3
#: Event time each micro-batch covers: a batch of 1M echoes is a 50,000/s probe fleet's 20 s.
BATCH_SPAN_US = 20_000_000
HIGHEST_US = 3_600_000_000


def generate(n: int, t0_us: int, seed: int = 7, partitions: int | None = None) -> pa.Table:
    """Parsed echoes in event-time order: lognormal latencies, rare multi-second stalls, losses;
    ``partitions`` probe partitions (series), round robin (``PROBE_PARTITIONS`` by default)."""
    series = partitions or PROBE_PARTITIONS
    from streaming.marks import SOURCE_SCHEMA

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
        "partition": pa.array(np.arange(n, dtype=np.int64) % series),
        "leader": pa.array(np.arange(n, dtype=np.int64) % series % 3 + 1),
        "system": pa.array(np.full(n, "kafka")),
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


#: Echoes per v2 batch in the raw replays: what a probe at 1,000 msgs/s sends per 100 ms.
V2_BATCH = 100


def raw_values(table: pa.Table, echo_format: str) -> pa.Table:
    """The echoes of ``generate`` as the Kafka values a probe writes: v1 records or v2 batches."""
    from core.echo import Echo, encode_record
    from core.echo_v2 import encode_batch

    t = table.to_pydict()
    echoes = [
        Echo(t["cluster"][i], t["cluster"][i], t["topic"][i], t["partition"][i], 1, i, 1024,
             t["intended_us"][i], t["sent_us"][i], t["acked_us"][i], t["received_us"][i],
             t["lost"][i], t["timeout_us"][i])
        for i in range(table.num_rows)
    ]  # fmt: skip
    if echo_format == "v1":
        values = [encode_record(e) for e in echoes]
    else:  # one batch never mixes clusters (the closing echo's is "end")
        values = []
        for k in range(0, len(echoes), V2_BATCH):
            group = echoes[k : k + V2_BATCH]
            same = [e for e in group if e.cluster == group[0].cluster]
            values += [encode_batch(same)]
            values += [encode_batch([e]) for e in group if e.cluster != group[0].cluster]
    return pa.table({"value": pa.array(values, pa.binary())})


class RawReplayReader:
    """``ReplayReader`` over Kafka values: each fetch of ``FETCH`` values is parsed with the
    Kafka source's own ``parse_with_stamps``, so parsing is measured with the aggregation."""

    FETCH = FETCH_BATCH  # Kafka values per parse call, as streaming.consume's fetches

    def read(self, partition: Any) -> Any:
        """The partition's values, memory-mapped, parsed ``FETCH`` at a time."""
        import pyarrow.compute as pc

        from streaming.combine import Combiner
        from streaming.marks import SOURCE_SCHEMA
        from testkit.parse import parse_with_stamps

        clock = {"read_s": 0.0, "parse_s": 0.0, "combine_s": 0.0}
        started = time.perf_counter()
        combiner = Combiner(self.windows, self.layout)  # type: ignore[attr-defined]
        with pa.memory_map(self.path) as source:  # type: ignore[attr-defined]
            column = pa.ipc.open_file(source).read_all().column("value")
            for offset in range(partition.start, partition.end, self.FETCH):
                t = time.perf_counter()
                values = column.slice(offset, min(self.FETCH, partition.end - offset)).to_pylist()
                t1 = time.perf_counter()
                parsed = parse_with_stamps(values, [None] * len(values), 300_000_000)
                intended = parsed.column("intended_us")
                ones = pc.add(pc.multiply(pc.fill_null(intended, 0), 0), 1)
                marked = pa.RecordBatch.from_arrays(
                    [*parsed.columns, intended, ones], schema=SOURCE_SCHEMA
                )
                t2 = time.perf_counter()
                out = list(combiner.add(marked))  # as the Kafka source: partials to Spark
                t3 = time.perf_counter()
                clock["read_s"] += t1 - t
                clock["parse_s"] += t2 - t1
                clock["combine_s"] += t3 - t2
                yield from out
        t = time.perf_counter()
        out = list(combiner.finish())
        clock["combine_s"] += time.perf_counter() - t
        clock["task_s"] = time.perf_counter() - started
        _task_line(partition, clock)
        yield from out


#: A worker's ``--conf`` of this key sets the job's ``jvm_options`` (the JVM is not started yet).
JVM_CONF = "spark.driver.extraJavaOptions"

#: Env var naming a file that read tasks append one JSON line of their stage times to.
TIMINGS_ENV = "NINES_AGG_TIMINGS"


def _task_line(partition: Any, clock: dict[str, float]) -> None:
    """One read task's stage seconds, appended to ``$NINES_AGG_TIMINGS`` (when set)."""
    path = os.environ.get(TIMINGS_ENV)
    if path:
        line = {"start": partition.start, "end": partition.end, "pid": os.getpid(), **clock}
        with open(path, "a") as f:
            f.write(json.dumps(line) + "\n")


def raw_replay_source() -> Any:
    """The ``nines-replay-raw`` data source (defined here: pyspark is imported late)."""
    from bench.replay import ReplayDataSource, ReplayReader

    class Reader(RawReplayReader, ReplayReader):
        pass

    class Source(ReplayDataSource):
        @classmethod
        def name(cls) -> str:
            return "nines-replay-raw"

        def streamReader(self, schema: Any) -> Any:
            return Reader(dict(self.options))

    return Source


def run_worker(
    path: str,
    master: str,
    rows_per_batch: int,
    expected: int,
    echo_format: str = "parsed",
    confs: dict[str, str] | None = None,
    trigger: str = "0.5s",
) -> dict[str, Any]:
    """In this process: replay the file through a ``StreamJob`` on ``master``; timings as JSON.

    ``echo_format`` ``parsed``: the file holds the Kafka source's rows (aggregation alone);
    ``v1``/``v2``: it holds Kafka values, parsed in the source as the Kafka source does.
    """
    from bench.replay import ReplayDataSource
    from monitor.pipeline import PipelineConfig, StreamPipeline
    from streaming.job import spark_session

    cluster = None
    if master == "standalone":  # a master and two 1-core workers on loopback, this run's own
        from bench.spark_cluster import StandaloneCluster

        cluster = StandaloneCluster(Path(tempfile.mkdtemp(prefix="nines-sa-")), 2, 1).start()
        os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
        master, cores = cluster.url, 2
    else:
        cores = int(master.removeprefix("local[").removesuffix("]"))
    config = PipelineConfig.model_validate(
        {
            "bootstrap": "replay:0",
            "windows": "10s,1m,1h",
            "watermark": "2m",
            "trigger": trigger,
            "metrics_port": 0,
            "master": master,
            "shuffle_partitions": cores,
            "state_store": os.environ.get("NINES_STATE_STORE", "rocksdb"),
        }
        # the JVM's flags are set before it starts: the job's setting, not a runtime conf
        | ({"jvm_options": confs[JVM_CONF]} if confs and JVM_CONF in confs else {})
    )
    timings = Path(tempfile.mkdtemp(prefix="nines-agg-t-")) / "tasks.jsonl"
    os.environ[TIMINGS_ENV] = str(timings)  # before the JVM starts: its Python workers inherit
    spark = spark_session(config)
    for key, value in (confs or {}).items():  # a lever tried on the stage breakdown
        if key != JVM_CONF:
            spark.conf.set(key, value)
    spark.dataSource.register(ReplayDataSource)
    fmt = "nines-replay"
    if echo_format != "parsed":
        spark.dataSource.register(raw_replay_source())
        fmt = "nines-replay-raw"
    counted = {"e2e": 0}
    roots = [os.getpid(), *(p.pid for p in (cluster.procs if cluster else []))]
    cpu_at_batch: list[float] = []
    roles_at_batch: list[dict[str, float]] = []
    wall_at_batch: list[float] = []

    def on_batch(batch_id: int, windows: list[Any], counters: Any) -> None:
        for w in windows:
            if w.resolution == "10s" and w.series.kind == "e2e" and w.series.partition != "all":
                counted["e2e"] += w.hist.total
        by_role = tree_cpu_by_role(roots)
        cpu_at_batch.append(sum(by_role.values()))
        roles_at_batch.append(by_role)
        wall_at_batch.append(time.monotonic())

    def source(session: Any) -> Any:
        return (
            session.readStream.format(fmt)
            .option("path", path)
            .option("rowsPerBatch", str(rows_per_batch))
            .option("splits", str(cores))
            .option("windows", config.spec.to_option())
            .option("hdr", config.layout.to_option())
            .load()
        )

    job = StreamPipeline(config, spark=spark, on_batch=on_batch, source=source)
    sink, sinks = job.job._sink, []

    def timed_sink(df: Any, batch_id: int) -> None:  # the batch's execution apart from the sink
        t0 = time.perf_counter()
        table = df.toArrow()
        t1 = time.perf_counter()
        sink(_Materialised(table), batch_id)
        sinks.append({"execute_s": t1 - t0, "sink_s": time.perf_counter() - t1})

    job.job._sink = timed_sink  # type: ignore[method-assign]  # foreachBatch binds it at start
    started = time.perf_counter()
    job.start(serve=False)
    try:
        process_all_available(job)
        wall_s = time.perf_counter() - started
        progress = [p for p in job.query.recentProgress if p["numInputRows"] > 0]
    finally:
        job.stop()
        spark.stop()
        if cluster is not None:
            cluster.stop()
    if counted["e2e"] != expected:
        raise RuntimeError(f"{master}: {counted['e2e']} e2e samples out of {expected} echoes")
    busy = [p["durationMs"]["triggerExecution"] / 1000 for p in progress]
    rows = [p["numInputRows"] for p in progress]  # partial histograms out of the combiner
    # echoes of the steady batches (not the cold nor the closing one): each reads rows_per_batch
    # values, a v2 value holding V2_BATCH echoes
    per_value = V2_BATCH if echo_format == "v2" else 1
    measured_s = sum(busy[1:-1])
    measured_rows = len(busy[1:-1]) * rows_per_batch * per_value
    state = [sum(op.get("numRowsTotal", 0) for op in p.get("stateOperators", [])) for p in progress]
    # CPU of the whole job (driver, JVM, Python workers, executors) over the steady batches
    steady_cpu = cpu_at_batch[-2] - cpu_at_batch[0] if len(cpu_at_batch) >= 3 else None
    return {
        "master": master,
        "echo_format": echo_format,
        "echoes": counted["e2e"],
        "partials_per_batch": rows,
        "batches": len(progress),
        "rows_per_batch": rows_per_batch,
        "echoes_per_batch": rows_per_batch * per_value,
        "echoes_per_s": round(measured_rows / measured_s) if measured_s else None,
        "batch_busy_s": [round(b, 2) for b in busy],
        "cold_batch_s": round(busy[0], 2),
        "wall_s_incl_start": round(wall_s, 2),
        "max_state_rows": max(state, default=0),
        "state_rows_per_batch": state,
        # Spark's own phases per batch (ms): addBatch, latestOffset, queryPlanning, walCommit...
        "duration_ms": [p["durationMs"] for p in progress],
        "state_operators": [
            [
                {k: op.get(k) for k in STATE_OP_KEYS if k in op}
                | {k: v for k, v in op.get("customMetrics", {}).items() if k in STATE_CUSTOM_KEYS}
                for op in p.get("stateOperators", [])
            ]
            for p in progress
        ],
        # the read tasks' own stages (raw formats): values out of the file, parse, combine
        "read_tasks": [json.loads(x) for x in timings.read_text().splitlines()]
        if timings.exists()
        else [],
        "e2e_samples_counted": counted["e2e"],
        "job_cpu_s_steady": round(steady_cpu, 2) if steady_cpu is not None else None,
        "job_cpu_us_per_echo": (
            round(steady_cpu / measured_rows * 1e6, 2) if steady_cpu and measured_rows else None
        ),
        "load_avg_1m_end": round(os.getloadavg()[0], 2),
        "confs": confs or {},
        # the job's CPU (whole process tree) and the clock at the end of every batch's sink
        "cpu_at_batch_s": [round(c, 3) for c in cpu_at_batch],
        "cpu_by_role_at_batch_s": [{k: round(v, 3) for k, v in r.items()} for r in roles_at_batch],
        "wall_at_batch_s": [round(w - wall_at_batch[0], 3) for w in wall_at_batch],
        "trigger": trigger,
        # per batch with output: df.toArrow() (read tasks, shuffles, state) and the sink proper
        "sinks": [{k: round(v, 4) for k, v in s.items()} for s in sinks],
    }


class _Materialised:
    """A batch already turned into Arrow, handed to the job's own sink."""

    def __init__(self, table: pa.Table) -> None:
        self.table = table

    def toArrow(self) -> pa.Table:
        return self.table


#: Per state operator and batch: what the stage breakdown reads from Spark's progress.
STATE_OP_KEYS = (
    "operatorName",
    "numRowsTotal",
    "numRowsUpdated",
    "numRowsRemoved",
    "allUpdatesTimeMs",
    "allRemovalsTimeMs",
    "commitTimeMs",
    "memoryUsedBytes",
    "numShufflePartitions",
    "numStateStoreInstances",
)
STATE_CUSTOM_KEYS = ("rocksdbCommitCheckpointLatency", "rocksdbCommitFlushLatency",
                     "rocksdbCommitCompactLatency", "rocksdbCommitWriteBatchLatency",
                     "rocksdbLoadedFromCloudLatencyMs", "rocksdbFilesCopiedBytes")  # fmt: skip


#: Process roles of the job's tree, by a piece of their command line (first match wins).
ROLES = (
    ("jvm", "java"),
    ("planner (Python data source)", "python_streaming_source_runner"),
    ("Python workers", "pyspark.worker"),
    ("Python workers", "pyspark.daemon"),
)


def tree_cpu_by_role(roots: list[int]) -> dict[str, float]:
    """CPU seconds of ``roots``' process tree by role: the driver (``roots[0]``), the JVM, the
    Python data source's planner, the Python workers (read tasks), anything else."""
    from bench.procstat import cpu_s, descendants

    out: dict[str, float] = {}
    for root in roots:
        for pid in descendants([root]):
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
                cpu = cpu_s(pid)
            except OSError:
                continue
            role = "driver (Python)" if pid == roots[0] else "other"
            for name, marker in ROLES:
                if pid != roots[0] and marker in cmd:
                    role = name
                    break
            out[role] = out.get(role, 0.0) + cpu
    return out


def tree_cpu_s(roots: list[int]) -> float:
    """utime + stime of ``roots`` and every descendant alive now (children of children too)."""
    from bench.procstat import cpu_s, descendants

    total = 0.0
    for pid in descendants(roots):
        try:
            total += cpu_s(pid)
        except OSError:
            continue
    return total


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


def run_formats(quick: bool = False) -> dict[str, Any]:
    """Parsing and aggregation apart from Kafka, v1 vs v2, on local[2]: the same echoes replayed
    as pre-parsed rows, as v1 Kafka values and as v2 batches; writes ``aggregation_formats.json``.
    """
    from bench.replay import write_replay_file

    batches, per_batch = (3, 100_000) if quick else (3, 300_000)
    n = batches * per_batch
    t0 = (int(time.time()) // 3600 * 3600 - 6 * 3600) * 1_000_000
    table = generate(n, t0)
    end_us = int(table["intended_us"][-1].as_py()) + 4 * HIGHEST_US
    table = pa.concat_tables([table, closing_echo(end_us)])
    runs: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="nines-aggfmt-") as tmp:
        for fmt in ("parsed", "v1", "v2"):
            path = str(Path(tmp) / f"{fmt}.arrow")
            if fmt == "parsed":
                write_replay_file(path, table)
                rows = per_batch
            else:
                values = raw_values(table, fmt)
                with pa.OSFile(path, "wb") as sink, pa.ipc.new_file(sink, values.schema) as w:
                    w.write_table(values, max_chunksize=100_000)
                runs.setdefault("bytes_per_echo", {})[fmt] = round(
                    sum(len(v) for v in values.column("value").to_pylist()) / table.num_rows, 1
                )
                rows = per_batch if fmt == "v1" else per_batch // V2_BATCH
            cmd = [sys.executable, "-m", "bench.aggregation", "--worker", path, "local[2]"]
            cmd += [str(rows), str(n), "--format", fmt]
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1800, check=False)
            lines = [x for x in proc.stdout.splitlines() if x.startswith("{")]
            if proc.returncode != 0 or not lines:
                raise RuntimeError(f"{fmt}: exit {proc.returncode}: {proc.stderr[-600:]}")
            runs[fmt] = json.loads(lines[-1])
            print(json.dumps(runs[fmt]), flush=True)
    payload = {
        "benchmark": "aggregation_formats",
        "quick": quick,
        "setup": (
            f"{n:,} generated echoes (+1 that closes every window) on local[2], {per_batch:,} "
            "echoes per micro-batch, windows 10s, 1m, 1h, 3 kinds: replayed as the Kafka "
            f"source's parsed rows (aggregation alone), as v1 Kafka values and as v2 batches of "
            f"{V2_BATCH}, the values parsed in the source by testkit.parse.parse_with_stamps "
            "10,000 at a time. echoes/s = echoes of the steady batches / their trigger time."
        ),
        "runs": runs,
        "target_v2_echoes_per_s": 2_000_000,
    }
    write_result("aggregation_formats", payload)
    return payload


def main(argv: list[str] | None = None) -> int:
    """``--worker PATH MASTER ROWS EXPECTED`` runs one replay; otherwise the whole part."""
    ap = argparse.ArgumentParser(prog="python -m bench.aggregation", description=__doc__)
    ap.add_argument("--worker", nargs=4, metavar=("PATH", "MASTER", "ROWS", "EXPECTED"))
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--format", default="parsed", help="worker: parsed, v1 or v2 values")
    ap.add_argument("--formats", action="store_true", help="v1 vs v2, parsing included")
    ap.add_argument("--conf", action="append", default=[], help="worker: a Spark SQL conf K=V")
    ap.add_argument("--trigger", default="0.5s", help="worker: the processing-time trigger")
    args = ap.parse_args(argv)
    if args.worker:
        path, master, rows, expected = args.worker
        confs = dict(c.split("=", 1) for c in args.conf)
        result = run_worker(
            path, master, int(rows), int(expected), args.format, confs, args.trigger
        )
        print(json.dumps(result), flush=True)
        return 0
    if args.formats:
        print(json.dumps(run_formats(args.quick), indent=2))
        return 0
    print(json.dumps(run_aggregation(args.quick), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
