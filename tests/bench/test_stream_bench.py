"""Aggregation throughput of the stream job on local[2], against a pure-Python hdrh loop.

Writes ``bench/results/stream.json``. The job is warmed up on other echoes first (its cold
start is reported apart), then the measured echoes are written and timed until every window
holding them has closed. Both sides see the same pre-generated echoes: Spark reads
them from a real (embedded) Kafka topic through the whole job (source, parse, late marking,
bucket expression, one stateful aggregation for every resolution, foreachBatch histograms); the
baseline records the same latency values into ``hdrh.HdrHistogram``s keyed like the job's groups.
``NINES_BENCH_QUICK=1`` shrinks the data set.
"""

from __future__ import annotations

import json
import os
import platform
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from kafka_cluster import producer, unique_topic, wait_for

from core.echo import Echo, decode_record, encode_record
from streaming.config import StreamConfig
from streaming.parse import parse_values

pytestmark = pytest.mark.bench

ROOT = Path(__file__).resolve().parents[2]
RESULT = ROOT / "bench" / "results" / "stream.json"
QUICK = os.environ.get("NINES_BENCH_QUICK") == "1"
ECHOES = 40_000 if QUICK else 960_000
#: Echoes the job processes before the measurement (cold start is reported separately).
WARMUP = 5_000
#: ``max_records_per_batch``: the measured echoes arrive over several micro-batches.
BATCH = 480_000
#: Echo-topic partitions: the embedded broker keeps ~5 MiB per partition, so spread the data.
PARTITIONS = 64
PROBE_PARTITIONS = 3
#: Event time the echoes cover: as a fleet producing 200,000 echoes/s (the target) writes them.
#: The job's state work per batch grows with the distinct (window, series, kind, bucket) keys a
#: batch touches, not with its echoes; 320k echoes spread over 600 s touched 240k keys per
#: 80k-echo batch, a 533 echoes/s fleet replayed at full speed, not a busy one.
FLEET_RATE = 200_000
SPAN_S = ECHOES / FLEET_RATE
WINDOWS = {"10s": 10_000_000, "1m": 60_000_000, "1h": 3_600_000_000}


def generate(n: int, t0_us: int, cluster: str = "c") -> list[Echo]:
    """Lognormal latencies (median ~5 ms) with rare multi-second stalls and a few losses."""
    rng = np.random.default_rng(7)
    intended = t0_us + np.sort(rng.integers(0, int(SPAN_S * 1_000_000), n))
    lat = rng.lognormal(8.5, 1.0, n).astype(np.int64) + 1
    stall = rng.random(n) < 0.001
    lat[stall] = rng.integers(1_000_000, 5_000_000, int(stall.sum()))
    lost = rng.random(n) < 0.001
    out = []
    for i in range(n):
        it = int(intended[i])
        e2e = int(lat[i])
        out.append(
            Echo(
                "bench",
                cluster,
                "nines.probe",
                i % PROBE_PARTITIONS,
                1,
                i,
                512,
                it,
                it + 30,
                it + e2e // 2,
                None if lost[i] else it + e2e,
                bool(lost[i]),
                30_000_000 if lost[i] else None,
            )
        )
    return out


def hdrh_baseline(echoes: list[Echo]) -> float:
    """Seconds for a pure-Python loop recording every sample into per-group hdrh histograms."""
    from hdrh.histogram import HdrHistogram

    samples = []
    for e in echoes:
        samples.append((e.intended_us, str(e.partition), "e2e", e.end_to_end_us))
        samples.append((e.intended_us, str(e.partition), "publish", e.publish_us))
        samples.append((e.intended_us, str(e.partition), "send_lag", e.send_lag_us))
    hists: dict[tuple[str, int, str, str], Any] = {}
    started = time.perf_counter()
    for intended_us, partition, kind, value in samples:
        if value is None:
            continue
        for res, span in WINDOWS.items():
            key = (res, intended_us // span, partition, kind)
            h = hists.get(key)
            if h is None:
                h = hists[key] = HdrHistogram(1, 3_600_000_000, 3)
            h.record_value(min(value, 3_600_000_000))
    return time.perf_counter() - started


def test_stream_aggregation_throughput(broker: Any) -> None:
    from monitor.pipeline import StreamPipeline
    from streaming.job import spark_session

    t0 = (int(time.time()) // 3600 * 3600 - 3 * 3600) * 1_000_000
    echoes = generate(ECHOES, t0)
    values = [encode_record(e) for e in echoes]

    started = time.perf_counter()
    parsed = parse_values(values)
    parse_s = time.perf_counter() - started
    assert parsed.num_rows == ECHOES
    n_ref = min(ECHOES, 40_000)
    started = time.perf_counter()
    for v in values[:n_ref]:
        decode_record(v)
    decode_s = time.perf_counter() - started
    baseline_s = hdrh_baseline(echoes)

    topic = unique_topic(broker, PARTITIONS)
    prod = producer(broker.bootstrap, **{"linger.ms": 50, "compression.type": "lz4"})

    def send(batch: list[bytes]) -> None:
        for i, v in enumerate(batch):
            prod.produce(topic, value=v, partition=i % PARTITIONS)
            if i % 20_000 == 0:
                prod.flush()
        prod.flush()

    config = StreamConfig(
        bootstrap=broker.bootstrap,
        echo_topic=topic,
        windows="10s,1m,1h",
        watermark="2m",
        trigger="1s",
        starting_offsets="earliest",
        max_records_per_batch=BATCH,
        metrics_port=0,
        master="local[2]",
        shuffle_partitions=2,
    )
    spark = spark_session(config)
    counted = {"e2e": 0, "warm": 0}
    lock = threading.Lock()

    def on_batch(batch_id: int, windows: list[Any], counters: Any) -> None:
        with lock:
            for w in windows:
                if w.resolution == "10s" and w.series.kind == "e2e" and w.series.partition != "all":
                    counted["warm" if w.series.cluster == "warmup" else "e2e"] += w.hist.total

    # warm-up: Spark's Python workers, code generation and the state store, on other data
    warm = generate(WARMUP, t0 - 1_800_000_000, cluster="warmup")
    send([encode_record(e) for e in warm])
    job = StreamPipeline(config, spark=spark, on_batch=on_batch)
    cold_started = time.perf_counter()
    job.start(serve=False)
    try:
        job.process_all_available()
        cold_s = time.perf_counter() - cold_started
        warm_batches = len(job.query.recentProgress)
        started = time.perf_counter()
        send(values)
        # a last echo far ahead moves the watermark past every window, 1h included
        end_us = t0 + 4 * 3_600_000_000
        send(
            [encode_record(Echo("bench", "c", "pusher", 0, 1, 0, 1, end_us, end_us, None, end_us))]
        )
        wait_for(lambda: counted["e2e"] >= ECHOES, timeout_s=420, interval_s=0.1)
        wall_s = time.perf_counter() - started
        time.sleep(0.5)
        progress = list(job.query.recentProgress)[warm_batches:]
    finally:
        job.stop()
    assert counted["e2e"] == ECHOES
    busy_ms = sum(p["durationMs"].get("triggerExecution", 0) for p in progress)
    input_rows = sum(p["numInputRows"] for p in progress)
    state_rows = max(
        (op.get("numRowsTotal", 0) for p in progress for op in p.get("stateOperators", [])),
        default=0,
    )

    # steady batches: full ones (not the first, partial, nor the one that only closes windows)
    steady = [p for p in progress if p["numInputRows"] >= BATCH // 2]
    steady_rows = sum(p["numInputRows"] for p in steady)
    steady_ms = sum(p["durationMs"].get("triggerExecution", 0) for p in steady)
    spark_per_s = ECHOES / (busy_ms / 1000)
    hdrh_per_s = ECHOES / baseline_s
    result = {
        "echoes": ECHOES,
        "quick": QUICK,
        "resolutions": list(WINDOWS),
        "kinds_per_echo": 3,
        "spark": {
            "master": "local[2]",
            "echoes_per_s": round(spark_per_s),
            "steady_echoes_per_s": round(steady_rows / (steady_ms / 1000)) if steady_ms else None,
            "wall_echoes_per_s": round(ECHOES / wall_s),
            "per_batch": [
                {
                    "rows": p["numInputRows"],
                    "ms": p["durationMs"].get("triggerExecution", 0),
                    "state_rows_updated": sum(
                        op.get("numRowsUpdated", 0) for op in p.get("stateOperators", [])
                    ),
                }
                for p in progress
            ],
            "event_time_span_s": SPAN_S,
            "fleet_rate_modelled_per_s": FLEET_RATE,
            "kafka_partitions": PARTITIONS,
            "batch_busy_s": round(busy_ms / 1000, 2),
            "wall_s_from_first_write": round(wall_s, 2),
            "max_records_per_batch": BATCH,
            "batches": len(progress),
            "input_rows": input_rows,
            "max_state_rows": state_rows,
            "cold_start_s": round(cold_s, 2),
            "warmup_echoes": WARMUP,
        },
        "parse": {
            "pyarrow_records_per_s": round(ECHOES / parse_s),
            "reference_decode_records_per_s": round(n_ref / decode_s),
        },
        "hdrh_python_loop": {
            "echoes_per_s": round(hdrh_per_s),
            "echoes_per_s_incl_json_decode": round(1 / (1 / hdrh_per_s + decode_s / n_ref)),
            "record_calls_per_echo": 3 * len(WINDOWS),
            "seconds": round(baseline_s, 2),
        },
        "spark_vs_hdrh_ratio": round(spark_per_s / hdrh_per_s, 2),
        "spark_wall_vs_hdrh_ratio": round((ECHOES / wall_s) / hdrh_per_s, 2),
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "load_avg_1m_at_end": round(os.getloadavg()[0], 2),
            "note": "2 cores shared with other work; one run after a warm-up batch",
        },
    }
    RESULT.parent.mkdir(parents=True, exist_ok=True)
    RESULT.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
