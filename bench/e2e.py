"""End to end through the broker: v1 and v2 echoes on Apache Kafka (the mock and Tansu on
request), on local[1] and local[2], with where the time goes, against the pure-Python hdrh loop.

``python -m bench.e2e [--quick] [--engines kafka,mock,tansu] [--masters local[1],local[2]]``
(part ``e2e`` of ``bench.run``) writes ``bench/results/e2e.json``. Issue 24's rules: ``SERIES``
probe partitions (series), the default 10s/1m/1h resolutions, ``BATCH_ECHOES`` echoes per
micro-batch (at most 1,000,000; ``maxRecordsPerBatch`` counts Kafka messages, so v2 gets
``BATCH_ECHOES / V2_BATCH``), and at least ``STEADY_BATCHES`` full batches measured after the
query's first, whose echoes are excluded with its time. The seeded echoes
(``bench.aggregation.generate``) are encoded as v1 records or v2 batches of ``V2_BATCH``; each
(master, format) run is a fresh worker process (its own JVM) with a fresh one-broker ``nines
broker`` (``kafka``: one KRaft JVM, replication factor 1), the echoes produced before the job
starts (lz4, as the probe's echo producer), a warm-up query on other echoes (Python workers,
code generation), then the measured query: ``StreamPipeline`` reading from the earliest offsets.
Every e2e sample must come out of the closed 10 s windows, or the run fails.

Where the time goes, per batch, with cheap timers and no change to the job's code path:

* the driver's phases from Spark's progress (``latestOffset``: ListOffsets and the tail fetch;
  ``addBatch``; the rest), and inside ``addBatch`` the batch's execution (``df.toArrow()`` in
  the sink: read tasks, shuffle, state) apart from the sink proper (closed windows, exporter);
* the read tasks' own time, summed over tasks (``TimedKafkaReader``): in ``consume()``, parse
  and marking, and the combiner; one JSON line per task in ``$NINES_E2E_TIMINGS``;
* the state operator's update/removal/commit times from Spark's progress.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa

from bench.machine import RESULTS_DIR, write_result
from streaming.offset_log import planned_batch_id
from streaming.source import KafkaEchoReader, NinesKafkaDataSource
from testkit.spark import process_all_available

ROOT = Path(__file__).resolve().parents[1]
ENGINES = ("kafka", "mock", "tansu")
#: What ``python -m bench.e2e`` measures: Apache Kafka (the mock stays the fault double).
DEFAULT_ENGINES = ("kafka",)
FORMATS = ("v1", "v2")
MASTERS = ("local[1]", "local[2]")
#: Probe partitions, each a series (issue 24: 12 or more).
SERIES = 12
#: Echoes per micro-batch by format (issue 24: at most 1,000,000). v1 at 400,000 before: the
#: fixed cost of a micro-batch weighed 2.5 times as often (local[2] 271,781/s vs 383,652/s).
BATCH_ECHOES = {"v2": 1_000_000, "v1": 1_000_000}
#: Full batches measured after the query's first (issue 24: at least 5).
STEADY_BATCHES = 5
#: Echoes per v2 Kafka message: the probe's BatchingEchoPublisher default (and at most 1,000).
V2_BATCH = 1000
#: Echo-topic partitions: the mock keeps ~5 MiB of batches per partition, v1 is ~275 B/echo.
PARTITIONS = 64
PROBE_PARTITIONS = 3
WARM_ECHOES = 20_000
TIMINGS_ENV = "NINES_E2E_TIMINGS"
WINDOWS = ("10s", "1m", "1h")
HIGHEST_US = 3_600_000_000


def cores_of(master: str) -> int:
    """Cores of a ``local[N]`` master (the standalone cluster's runs give theirs)."""
    return int(master.removeprefix("local[").removesuffix("]"))


# --- data ------------------------------------------------------------------------------------


def echoes(n: int, t0_us: int, cluster: str, seed: int = 7) -> list[Any]:
    """``n`` seeded echoes of ``bench.aggregation.generate`` as ``core.echo.Echo`` records."""
    from bench.aggregation import generate
    from core.echo import Echo

    t = generate(n, t0_us, seed, partitions=SERIES).to_pydict()
    return [
        Echo("bench-probe", cluster, t["topic"][i], t["partition"][i], 1, i, 1024,
             t["intended_us"][i], t["sent_us"][i], t["acked_us"][i], t["received_us"][i],
             t["lost"][i], t["timeout_us"][i])
        for i in range(n)
    ]  # fmt: skip


def encoded(n: int, t0_us: int, cluster: str, echo_format: str) -> list[bytes]:
    """``encode(echoes(n, ...))`` a chunk at a time: millions of echoes, not millions of objects
    alive at once (each chunk its own seed, its event times continuing the previous one's)."""
    from bench.aggregation import BATCH_SPAN_US

    chunk, out = 200_000, []
    for k in range(0, n, chunk):
        t_us = t0_us + k * BATCH_SPAN_US // 1_000_000
        out += encode(echoes(min(chunk, n - k), t_us, cluster, seed=7 + k // chunk), echo_format)
    return out


def encode(records: Sequence[Any], echo_format: str) -> list[bytes]:
    """Kafka values as a probe writes them: one v1 record per echo, or v2 batches of V2_BATCH."""
    from core.echo import encode_record
    from core.echo_v2 import encode_batch

    if echo_format == "v1":
        return [encode_record(e) for e in records]
    if echo_format == "v2":
        return [encode_batch(records[k : k + V2_BATCH]) for k in range(0, len(records), V2_BATCH)]
    raise ValueError(f"echo format must be v1 or v2, not {echo_format!r}")


def produce(
    bootstrap: str, topic: str, values: Sequence[bytes], partitions: int = PARTITIONS
) -> float:
    """Write ``values`` round-robin over the topic's partitions; seconds until all are acked."""
    from confluent_kafka import Producer

    prod = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 50,
            "compression.type": "lz4",
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 1_000_000,
            "queue.buffering.max.kbytes": 1_048_576,
            "message.max.bytes": 2_000_000,
        }
    )
    errors: list[str] = []

    def delivered(err: Any, _msg: Any) -> None:
        if err is not None:
            errors.append(str(err))

    started = time.perf_counter()
    for i, value in enumerate(values):
        while True:
            try:
                prod.produce(topic, value=value, partition=i % partitions, on_delivery=delivered)
                break
            except BufferError:
                prod.poll(0.05)
        prod.poll(0)
    left = prod.flush(300)
    if left or errors:
        raise RuntimeError(f"produce to {topic}: {left} not delivered, errors {errors[:3]}")
    return time.perf_counter() - started


# --- timers around the reader's stages (run in Spark's Python workers) ------------------------


class TimedConsumer:
    """A confluent-kafka consumer whose ``consume`` calls add up their seconds in ``clock``."""

    def __init__(self, consumer: Any, clock: dict[str, float]) -> None:
        self._consumer, self._clock = consumer, clock

    def consume(self, num_messages: int = 1, timeout: float = -1) -> Any:
        """The wrapped ``consume``, timed."""
        started = time.perf_counter()
        try:
            return self._consumer.consume(num_messages, timeout)
        finally:
            self._clock["consume_s"] += time.perf_counter() - started

    def __getattr__(self, name: str) -> Any:
        return getattr(self._consumer, name)


class TimedKafkaReader(KafkaEchoReader):
    """``KafkaEchoReader`` whose ``read`` times its stages (same calls as the base ``read``:
    ``marked_rows`` into the ``Combiner``) and appends them as one JSON line per task."""

    def partitions(self, start: dict, end: dict) -> list[Any]:
        """The base slices, each told its batch id (for the timings line)."""
        out = super().partitions(start, end)
        batch = planned_batch_id(self.checkpoint)
        for s in out:
            s.batch_id = batch  # type: ignore[attr-defined]
        return out

    def _consumer(self) -> Any:
        clock = getattr(self, "_clock", None)
        consumer = super()._consumer()
        return consumer if clock is None else TimedConsumer(consumer, clock)

    def read(self, partition: Any) -> Iterator[pa.RecordBatch]:
        """The base ``read``, with the time in each stage added up."""
        from streaming.combine import Combiner

        self._clock = clock = {"consume_s": 0.0}
        combiner = Combiner(self.windows, self.layout)
        marked_s = combine_s = 0.0
        records = partials = 0
        started = time.perf_counter()
        rows = self.marked_rows(partition)
        while True:
            t = time.perf_counter()
            marked = next(rows, None)
            marked_s += time.perf_counter() - t
            if marked is None:
                break
            records += marked.num_rows
            t = time.perf_counter()
            out = list(combiner.add(marked))
            combine_s += time.perf_counter() - t
            partials += sum(b.num_rows for b in out)
            yield from out
        t = time.perf_counter()
        out = list(combiner.finish())
        combine_s += time.perf_counter() - t
        partials += sum(b.num_rows for b in out)
        yield from out
        line = {
            "topic": self.topic,
            "batch": getattr(partition, "batch_id", None),
            "consume_s": clock["consume_s"],
            "parse_mark_s": marked_s - clock["consume_s"],
            "combine_s": combine_s,
            "task_s": time.perf_counter() - started,
            "rows": records,
            "partials": partials,
        }
        path = os.environ.get(TIMINGS_ENV)
        if path:
            with open(path, "a") as f:
                f.write(json.dumps(line) + "\n")


class TimedKafkaDataSource(NinesKafkaDataSource):
    """``nines-kafka`` with the timed reader."""

    def streamReader(self, schema: Any) -> Any:
        """A timed reader over the configured topic."""
        return TimedKafkaReader(dict(self.options))


class _TimedSession:
    """A Spark session whose ``dataSource.register`` registers the timed source instead, so the
    job's own ``read_echoes`` builds the query (same options, nothing copied)."""

    def __init__(self, spark: Any) -> None:
        self._spark = spark

    @property
    def dataSource(self) -> Any:
        return self

    def register(self, _cls: Any) -> None:
        self._spark.dataSource.register(TimedKafkaDataSource)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._spark, name)


class _Materialised:
    """A batch already turned into Arrow, handed to the job's own sink."""

    def __init__(self, table: pa.Table) -> None:
        self.table = table

    def toArrow(self) -> pa.Table:
        return self.table


# --- one run ---------------------------------------------------------------------------------


def stage_breakdown(
    progress: list[dict[str, Any]],
    sinks: list[dict[str, float]],
    tasks: list[dict[str, Any]],
    cores: int = 2,
) -> dict[str, Any]:
    """Seconds per stage over a run's batches: driver phases (wall), the batch's execution and
    the sink (wall), the read tasks' stages and the state operator (task time, summed)."""

    def ms(p: dict[str, Any], key: str) -> float:
        return float(p.get("durationMs", {}).get(key, 0)) / 1000

    def state(key: str) -> float:
        return sum(
            float(op.get(key, 0)) / 1000 for p in progress for op in p.get("stateOperators", [])
        )

    trigger = sum(ms(p, "triggerExecution") for p in progress)
    latest = sum(ms(p, "latestOffset") for p in progress)
    add = sum(ms(p, "addBatch") for p in progress)
    execute = sum(s["execute_s"] for s in sinks)
    sink = sum(s["sink_s"] for s in sinks)
    consume = sum(t["consume_s"] for t in tasks)
    parse = sum(t["parse_mark_s"] for t in tasks)
    combine = sum(t["combine_s"] for t in tasks)
    return {
        "wall_s": {
            "batches": round(trigger, 3),
            "latest_offset": round(latest, 3),
            "add_batch": round(add, 3),
            "execute": round(execute, 3),
            "sink": round(sink, 3),
            "other_driver": round(trigger - latest - add, 3),
        },
        "task_s": {
            "kafka_consume": round(consume, 3),
            "parse_mark": round(parse, 3),
            "combine": round(combine, 3),
            "read_tasks": round(sum(t["task_s"] for t in tasks), 3),
            "state_update": round(state("allUpdatesTimeMs"), 3),
            "state_removal": round(state("allRemovalsTimeMs"), 3),
            "state_commit": round(state("commitTimeMs"), 3),
            # the execution's task-seconds (its cores) that the reader did not use: Spark's
            # aggregation, shuffle, the Arrow hand-over to the JVM, scheduling
            "spark_rest": round(max(0.0, execute * cores - consume - parse - combine), 3),
        },
        "read_tasks": len(tasks),
        "records_read": sum(t["rows"] for t in tasks),
        "partials": sum(t["partials"] for t in tasks),
    }


def run_query(
    spark: Any,
    bootstrap: str,
    topic: str,
    batch_messages: int,
    expect: dict[str, int],
    master: str = "local[2]",
) -> dict[str, Any]:
    """The job over ``topic`` from its earliest offset until every e2e sample of cluster
    ``bench`` is out of a closed 10 s window; its progress and sink timings."""
    import threading

    from monitor.pipeline import PipelineConfig, StreamPipeline
    from streaming.job import read_echoes

    with tempfile.TemporaryDirectory(prefix="nines-e2e-ckpt-") as ckpt:
        config = PipelineConfig(
            bootstrap=bootstrap,
            echo_topic=topic,
            windows=WINDOWS,
            watermark=120.0,
            trigger=0.5,
            starting_offsets="earliest",
            max_records_per_batch=batch_messages,
            metrics_port=0,
            master=master,
            shuffle_partitions=cores_of(master),
            checkpoint=ckpt,
        )
        counted = {"bench": 0, "other": 0}
        lock = threading.Lock()

        def on_batch(batch_id: int, windows: list[Any], counters: Any) -> None:
            with lock:
                for w in windows:
                    s = w.series
                    if w.resolution == "10s" and s.kind == "e2e" and s.partition != "all":
                        counted["bench" if s.cluster == "bench" else "other"] += w.hist.total

        def source(session: Any) -> Any:
            return read_echoes(_TimedSession(session), config, ckpt)

        pipe = StreamPipeline(config, spark=spark, on_batch=on_batch, source=source)
        job = pipe.job
        sink = job._sink
        sinks: list[dict[str, float]] = []

        def timed_sink(df: Any, batch_id: int) -> None:
            t0 = time.perf_counter()
            table = df.toArrow()
            t1 = time.perf_counter()
            sink(_Materialised(table), batch_id)
            sinks.append({"execute_s": t1 - t0, "sink_s": time.perf_counter() - t1})

        job._sink = timed_sink  # type: ignore[method-assign]  # foreachBatch binds it at start
        started = time.perf_counter()
        pipe.start(serve=False)
        try:
            process_all_available(pipe)
            deadline = time.monotonic() + 120
            while counted["bench"] < expect["bench"] and time.monotonic() < deadline:
                time.sleep(0.05)
            wall_s = time.perf_counter() - started
            time.sleep(0.2)
            progress = [p for p in pipe.query.recentProgress if "addBatch" in p["durationMs"]]
        finally:
            pipe.stop()
    if counted["bench"] != expect["bench"]:
        raise RuntimeError(f"{topic}: {counted['bench']} e2e samples out of {expect['bench']}")
    return {"wall_s": wall_s, "progress": progress, "sinks": sinks}


def run_one(
    spark: Any,
    engine: str,
    echo_format: str,
    values: list[bytes],
    warm: list[bytes],
    n: int,
    batch_echoes: int,
    timings: Path,
    partitions: int = PARTITIONS,
    master: str = "local[2]",
) -> dict[str, Any]:
    """One fresh broker of ``engine``; the warm-up query, then the measured one."""
    from bench.procstat import cpu_s
    from testbroker import EmbeddedBroker

    per_message = 1 if echo_format == "v1" else V2_BATCH
    batch_messages = max(1, batch_echoes // per_message)
    topic = f"echoes-{engine}-{echo_format}"
    warm_topic = f"warm-{engine}-{echo_format}"
    topics = [(warm_topic, PARTITIONS), (topic, partitions)]
    with EmbeddedBroker(engine=engine, brokers=1, topics=topics) as broker:  # type: ignore[arg-type]
        # the broker's CPU: the process serving it (Kafka: its one JVM)
        pid = broker.broker_pid(1) if engine == "kafka" else broker.pid
        produce(broker.bootstrap, warm_topic, warm)
        produce_s = produce(broker.bootstrap, topic, values, partitions)
        run_query(spark, broker.bootstrap, warm_topic, batch_messages, {"bench": 0}, master)
        cpu0 = cpu_s(pid)
        measured = run_query(spark, broker.bootstrap, topic, batch_messages, {"bench": n}, master)
        broker_cpu_s = cpu_s(pid) - cpu0
    progress, wall_s = measured["progress"], measured["wall_s"]
    ids = {p["batchId"] for p in progress}
    tasks = [
        t
        for t in (json.loads(x) for x in timings.read_text().splitlines())
        if t["topic"] == topic and t["batch"] in ids
    ]
    busy_s = sum(p["durationMs"]["triggerExecution"] for p in progress) / 1000
    rows = [p["numInputRows"] for p in progress]
    # numInputRows counts partials out of the combiner, not echoes: a batch's echoes come from
    # its read tasks' parsed rows (one per echo, v1 or v2)
    echoes_in: dict[int, int] = {}
    for t in tasks:
        echoes_in[t["batch"]] = echoes_in.get(t["batch"], 0) + t["rows"]
    # issue 24's rules: the query's first batch is warm-up (its echoes and time excluded); the
    # steady batches are the full ones after it (not the tail, nor the closing echo's batch)
    steady = [p for p in progress[1:] if echoes_in.get(p["batchId"], 0) >= batch_echoes // 2]
    steady_s = sum(p["durationMs"]["triggerExecution"] for p in steady) / 1000
    steady_records = sum(p["numInputRows"] for p in steady)
    steady_ids = {p["batchId"] for p in steady}
    steady_msgs = sum(t["rows"] for t in tasks if t["batch"] in steady_ids)
    return {
        "engine": engine,
        "echo_format": echo_format,
        "master": master,
        "series": SERIES,
        "echoes": n,
        "echoes_per_batch": [echoes_in.get(p["batchId"], 0) for p in progress],
        "steady_batches": len(steady),
        "steady_echoes": steady_msgs,
        "batch_echoes": batch_echoes,
        "kafka_messages": len(values),
        "bytes_per_echo": round(sum(map(len, values)) / n, 1),
        "max_records_per_batch": batch_messages,
        "produce_s": round(produce_s, 2),
        "batches": len(progress),
        "batch_s": [round(p["durationMs"]["triggerExecution"] / 1000, 2) for p in progress],
        "partials_per_batch": rows,
        "busy_s": round(busy_s, 2),
        "wall_s": round(wall_s, 2),
        # the headline: issue 24's rules (steady batches only)
        "echoes_per_s": round(steady_msgs / steady_s) if steady_s else None,
        "all_batches_echoes_per_s": round(n / busy_s) if busy_s else None,
        "wall_echoes_per_s": round(n / wall_s),
        "steady_echoes_per_s": round(steady_msgs / steady_s) if steady_s else None,
        "duration_ms": [p["durationMs"] for p in progress],
        "steady_partials": steady_records,
        "broker_cpu_pct_of_core": round(broker_cpu_s / wall_s * 100, 1),
        "max_state_rows": max(
            (op.get("numRowsTotal", 0) for p in progress for op in p.get("stateOperators", [])),
            default=0,
        ),
        "stages": stage_breakdown(progress, measured["sinks"], tasks, cores_of(master)),
        "load_avg_1m_end": round(os.getloadavg()[0], 2),
    }


def decode_rate(values: list[bytes], echo_format: str, echoes: int) -> float:
    """Echoes/s of the reference decoder (``decode_record``/``decode_batch``) on one core."""
    from core.echo import decode_record
    from core.echo_v2 import decode_batch

    started = time.perf_counter()
    if echo_format == "v1":
        for v in values:
            decode_record(v)
    else:
        for v in values:
            decode_batch(v)
    return echoes / (time.perf_counter() - started)


def run_worker(
    n: int,
    batch_echoes: int,
    engines: Sequence[str],
    formats: Sequence[str],
    partitions: int = PARTITIONS,
    master: str = "local[2]",
) -> Any:
    """In this process: one Spark session on ``master`` for every run; returns the payload."""
    from bench.aggregation import BATCH_SPAN_US, generate, hdrh_seconds
    from core.echo import Echo
    from streaming.config import StreamConfig
    from streaming.job import spark_session

    t0 = (int(time.time()) // 3600 * 3600 - 6 * 3600) * 1_000_000
    # one echo far ahead closes every window, 1h included (its own, never counted)
    end_us = t0 + n * BATCH_SPAN_US // 1_000_000 + 4 * HIGHEST_US
    closing = Echo("bench-probe", "end", "nines.probe", 0, 1, 0, 1, end_us, end_us, None, end_us)
    warm_close = Echo("bench-probe", "warm", "nines.probe", 0, 1, 0, 1, t0, t0, None, t0)
    data: dict[str, list[bytes]] = {}
    warm: dict[str, list[bytes]] = {}
    decode: dict[str, int] = {}
    for fmt in formats:
        data[fmt] = [*encoded(n, t0, "bench", fmt), encode([closing], fmt)[0]]
        warm_values = encoded(WARM_ECHOES, t0 - 3 * HIGHEST_US, "warm", fmt)
        warm[fmt] = [*warm_values, encode([warm_close], fmt)[0]]
        sample = min(n, 50_000)
        decode[fmt] = round(decode_rate(encode(echoes(sample, t0, "b"), fmt), fmt, sample))
    baseline_n = min(n, 200_000)
    table = generate(baseline_n, t0, partitions=SERIES)
    before_s, _ = hdrh_seconds(table, baseline_n)

    timings = Path(os.environ[TIMINGS_ENV])
    cores = cores_of(master)
    spark = spark_session(StreamConfig(bootstrap="x:1", master=master, shuffle_partitions=cores))
    runs: dict[str, Any] = {}
    try:
        for engine in engines:
            for fmt in formats:
                key = f"{engine} {fmt} {master}"
                print(f"e2e: {key} ...", flush=True)
                try:
                    runs[key] = run_one(
                        spark,
                        engine,
                        fmt,
                        data[fmt],
                        warm[fmt],
                        n,
                        batch_echoes,
                        timings,
                        partitions,
                        master,
                    )
                except Exception as exc:  # keep the other runs; the report shows the reason
                    runs[key] = {"engine": engine, "echo_format": fmt, "error": str(exc)[:500]}
                print(f"e2e: {key} {json.dumps(runs[key])[:400]}", flush=True)
    finally:
        spark.stop()
    after_s, _ = hdrh_seconds(table, baseline_n)
    hdrh_per_s = baseline_n / min(before_s, after_s)
    for r in runs.values():
        if r.get("echoes_per_s"):
            r["vs_hdrh_loop"] = round(r["echoes_per_s"] / hdrh_per_s, 2)
            fmt = r["echo_format"]
            incl = 1 / (1 / hdrh_per_s + 1 / decode[fmt])
            r["vs_hdrh_loop_incl_decode"] = round(r["echoes_per_s"] / incl, 2)
    return {
        "runs": runs,
        "hdrh_python_loop": {
            "echoes": baseline_n,
            "echoes_per_s": round(hdrh_per_s),
            "echoes_per_s_before_after": [
                round(baseline_n / before_s),
                round(baseline_n / after_s),
            ],
            "record_calls_per_echo": 3 * len(WINDOWS),
        },
        "reference_decode_echoes_per_s": decode,
    }


def worker(
    n: int,
    batch_echoes: int,
    engines: Sequence[str] = ENGINES,
    formats: Sequence[str] = FORMATS,
    partitions: int = PARTITIONS,
    master: str = "local[2]",
) -> dict[str, Any]:
    """``run_worker`` in a fresh process (its own JVM and Spark session); its payload."""
    with tempfile.TemporaryDirectory(prefix="nines-e2e-") as tmp:
        env = dict(os.environ, **{TIMINGS_ENV: str(Path(tmp) / "tasks.jsonl")})
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
        cmd = [
            sys.executable,
            "-m",
            "bench.e2e",
            "--worker",
            str(n),
            str(batch_echoes),
            "--engines",
            ",".join(engines),
            "--formats",
            ",".join(formats),
            "--partitions",
            str(partitions),
            "--masters",
            master,
        ]
        proc = subprocess.run(
            cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=2400, check=False
        )
    lines = [x for x in proc.stdout.splitlines() if x.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"e2e worker: exit {proc.returncode}: {proc.stderr[-800:]}")
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def run_e2e(
    quick: bool = False,
    echoes_n: int | None = None,
    engines: Sequence[str] = DEFAULT_ENGINES,
    masters: Sequence[str] = MASTERS,
    formats: Sequence[str] = FORMATS,
) -> dict[str, Any]:
    """Every (master, format) in its own fresh worker process, on each engine; ``e2e.json``.

    Per format, ``BATCH_ECHOES`` a micro-batch (a twentieth with ``quick``) and enough echoes
    for the warm-up batch, ``STEADY_BATCHES`` full ones and a tail (``echoes_n`` overrides).
    """
    started = time.perf_counter()
    runs: dict[str, Any] = {}
    loops: list[int] = []
    decode: dict[str, int] = {}
    sizes: dict[str, dict[str, int]] = {}
    for master in masters:
        for fmt in formats:
            batch = BATCH_ECHOES[fmt] // (20 if quick else 1)
            n = echoes_n or int(batch * (STEADY_BATCHES + 1.5))
            sizes[fmt] = {"echoes": n, "batch_echoes": batch}
            print(f"e2e: {master} {fmt}: {n:,} echoes, {batch:,} a batch ...", flush=True)
            try:
                result = worker(n, batch, engines, (fmt,), PARTITIONS, master)
            except Exception as exc:  # keep the other runs; the report shows the reason
                for engine in engines:
                    runs[f"{engine} {fmt} {master}"] = {
                        "engine": engine, "echo_format": fmt, "master": master,
                        "error": str(exc)[:500],
                    }  # fmt: skip
                continue
            stamp = time.strftime("%Y-%m-%dT%H:%MZ", time.gmtime())
            runs |= {k: {**r, "run": stamp} for k, r in result["runs"].items()}
            loops.append(result["hdrh_python_loop"]["echoes_per_s"])
            decode |= result["reference_decode_echoes_per_s"]
    fresh = set(runs)
    previous = RESULTS_DIR / "e2e.json"
    if previous.exists():  # the runs not re-run now stay, each with its own load and time
        old = json.loads(previous.read_text())
        kept = {k: r for k, r in (old.get("runs") or {}).items() if k not in runs and "master" in r}
        runs = kept | runs
        sizes = (old.get("sizes") or {}) | sizes
    scaling = {}
    for engine in engines:
        for fmt in FORMATS:  # the kept runs' too
            one = (runs.get(f"{engine} {fmt} local[1]") or {}).get("echoes_per_s")
            two = (runs.get(f"{engine} {fmt} local[2]") or {}).get("echoes_per_s")
            if one and two:
                scaling[f"{engine} {fmt}"] = round(two / one, 2)
    payload = {
        "benchmark": "e2e",
        "quick": quick,
        "command": "python -m bench.e2e" + (" --quick" if quick else ""),
        "setup": (
            f"Per (master, format): seeded echoes of {SERIES} probe partitions (series) "
            f"(+1 that closes every window), produced (lz4) to a fresh one-broker `nines broker` "
            f"({', '.join(engines)}; Kafka: one KRaft JVM, replication factor 1) over "
            f"{PARTITIONS} partitions before the job starts: v1 one record per echo, v2 batches "
            f"of {V2_BATCH:,}. The job (StreamPipeline, N shuffle partitions on local[N], windows "
            f"{', '.join(WINDOWS)}, 3 kinds, RocksDB state) reads from the earliest offset, "
            + ", ".join(f"{v['batch_echoes']:,} {k} echoes" for k, v in sizes.items())
            + " per micro-batch, after a warm-up query on "
            f"{WARM_ECHOES:,} other echoes in the same Spark session (a fresh process per "
            "master and format); every e2e sample is checked out of the closed 10 s windows. "
            "echoes/s (issue 24's rules) = the echoes of the full batches after the query's "
            "first / their batch time (Spark's triggerExecution); the first batch's echoes and "
            "time are excluded, as are the tail's and the closing echo's."
        ),
        "sizes": sizes,
        "series": SERIES,
        "v2_batch": V2_BATCH,
        "partitions": PARTITIONS,
        "wall_s": round(time.perf_counter() - started, 1),
        "runs": runs,
        "scaling_local2_over_local1": scaling,
        "hdrh_python_loop": {
            "echoes": 200_000,
            "echoes_per_s": max(loops) if loops else None,
            "echoes_per_s_before_after": loops,
            "record_calls_per_echo": 3 * len(WINDOWS),
        },
        "reference_decode_echoes_per_s": decode,
        "targets_echoes_per_s": {"v2": 1_000_000, "v1": 300_000},
        "target_scaling": 1.8,
        "target_vs_hdrh_loop": 10,
    }
    hdrh = max(loops) if loops else None
    for key, r in runs.items():  # the kept runs keep the ratio to their own run's loop
        if r.get("echoes_per_s") and hdrh and key in fresh:
            r["vs_hdrh_loop"] = round(r["echoes_per_s"] / hdrh, 2)
    write_result("e2e", payload)
    return payload


#: (format, echoes, echoes per micro-batch) of the batch-size sweep: the combiner merges an
#: echo into a partial already in the batch when its (window, series, kind, bucket) repeats, so
#: the partials Spark aggregates, the cost that dominates, grow with the distinct buckets of a
#: batch and not with its echoes. v1 stops at 2M echoes: the mock keeps ~5 MiB per partition.
SWEEP = (
    ("v2", 4_000_000, 250_000),
    ("v2", 4_000_000, 1_000_000),
    ("v2", 4_000_000, 4_000_000),
    ("v1", 2_000_000, 250_000),
    ("v1", 2_000_000, 1_000_000),
)
SWEEP_PARTITIONS = 128


def run_sweep(quick: bool = False) -> dict[str, Any]:
    """Echoes/s on the mock by micro-batch size, one fresh worker per case; ``e2e_sweep.json``."""
    started = time.perf_counter()
    cases = []
    for fmt, n, batch in SWEEP:
        if quick:
            n, batch = n // 20, batch // 20
        print(f"e2e sweep: {fmt} {n:,} echoes, {batch:,} per batch ...", flush=True)
        try:
            result = worker(n, batch, ("mock",), (fmt,), SWEEP_PARTITIONS)
            run = result["runs"][f"mock {fmt} local[2]"]
            loop = result["hdrh_python_loop"]["echoes_per_s"]
        except Exception as exc:  # keep the other cases; the report shows the reason
            run, loop = {"engine": "mock", "echo_format": fmt, "error": str(exc)[:500]}, None
        cases.append({**run, "batch_echoes": batch, "hdrh_loop_echoes_per_s": loop})
    payload = {
        "benchmark": "e2e_sweep",
        "quick": quick,
        "command": "python -m bench.e2e --sweep" + (" --quick" if quick else ""),
        "setup": (
            "The e2e run of `bench.e2e` on the mock (the same seeded echoes, job and checks, a "
            f"fresh worker process per case, {SWEEP_PARTITIONS} partitions) with more echoes and "
            "larger micro-batches. The job's default `max_records_per_batch` is 1,000,000 Kafka "
            f"messages: 1,000,000 v1 echoes, or up to {V2_BATCH:,}× that in v2 batches."
        ),
        "partitions": SWEEP_PARTITIONS,
        "wall_s": round(time.perf_counter() - started, 1),
        "cases": cases,
    }
    write_result("e2e_sweep", payload)
    return payload


def main(argv: list[str] | None = None) -> int:
    """CLI: ``[--quick] [--echoes N] [--sweep]``."""
    ap = argparse.ArgumentParser(prog="python -m bench.e2e", description=__doc__)
    ap.add_argument("--quick", action="store_true", help="100,000 echoes per run")
    ap.add_argument("--echoes", type=int, default=None, help="echoes per run")
    ap.add_argument("--worker", nargs=2, metavar=("ECHOES", "BATCH"), help=argparse.SUPPRESS)
    ap.add_argument("--engines", default=",".join(DEFAULT_ENGINES), help=",".join(ENGINES))
    ap.add_argument("--formats", default=",".join(FORMATS))
    ap.add_argument("--masters", default=",".join(MASTERS))
    ap.add_argument("--partitions", type=int, default=PARTITIONS, help=argparse.SUPPRESS)
    ap.add_argument("--sweep", action="store_true", help="echoes/s by micro-batch size (mock)")
    args = ap.parse_args(argv)
    if args.worker:
        engines = [e for e in args.engines.split(",") if e]
        formats = [f for f in args.formats.split(",") if f]
        n, batch = int(args.worker[0]), int(args.worker[1])
        result = run_worker(n, batch, engines, formats, args.partitions, args.masters)
        print(json.dumps(result), flush=True)
        return 0
    if args.sweep:
        sweep = run_sweep(args.quick)
        print(json.dumps(sweep["cases"], indent=2))
        return 1 if any("error" in c for c in sweep["cases"]) else 0
    engines = [e for e in args.engines.split(",") if e]
    masters = [m for m in args.masters.split(",") if m]
    formats = [f for f in args.formats.split(",") if f]
    payload = run_e2e(args.quick, args.echoes, engines, masters, formats)
    print(json.dumps({k: v for k, v in payload.items() if k != "machine"}, indent=2))
    return 1 if any("error" in r for r in payload["runs"].values()) else 0


if __name__ == "__main__":
    sys.exit(main())
