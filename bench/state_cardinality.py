"""Spark's state at its series cap: rows and memory of one batch.

``python -m bench.state_cardinality`` writes ``--series`` (cluster, topic, partition) series, a
few echoes each in one 10 s window, plus ``--beyond`` series more, to an embedded broker; the
real ``StreamJob`` (default windows, ``max_series``) reads them in one micro-batch. Reports the
state's rows and memory from Spark's query progress and the records the cap refused
(``bad``/``series_cap``, counted once the window holding them closes). The run fails unless
every refused record is counted.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench.procstat import descendants
from core.echo import DEFAULT_ECHO_TOPIC, Echo, encode_record
from streaming.config import StreamConfig
from streaming.counters import StreamCounters
from streaming.job import StreamJob
from testkit.spark import process_all_available

TOPIC = DEFAULT_ECHO_TOPIC
KAFKA_PARTITIONS = 4
PROBE_PARTITIONS_PER_TOPIC = 100


def measure(series: int, beyond: int, echoes: int, max_series: int) -> dict[str, float]:
    """One batch of ``series + beyond`` series into a job capped at ``max_series``."""
    from confluent_kafka import Producer

    from testbroker import EmbeddedBroker

    t0 = (int(time.time()) // 60 * 60 - 3600) * 1_000_000
    with (
        EmbeddedBroker(topics=[(TOPIC, KAFKA_PARTITIONS)]) as broker,
        tempfile.TemporaryDirectory() as tmp,
    ):
        prod = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 20})
        total = series + beyond
        for k in range(echoes):
            for s in range(total):
                at = t0 + k * 1_000_000 + s % 1000
                lat = 800 + 150 * k + s % 7
                topic, partition = divmod(s, PROBE_PARTITIONS_PER_TOPIC)
                e = Echo(
                    "p", "c", f"t{topic}", partition, 1, k, 1, at, at + 5, at + lat // 2, at + lat
                )
                prod.produce(TOPIC, encode_record(e), partition=s % KAFKA_PARTITIONS)
                prod.poll(0)
        prod.flush()
        counters = StreamCounters()
        lock = threading.Lock()

        def on_batch(_: int, __: list[Any], c: StreamCounters) -> None:
            nonlocal counters
            with lock:
                counters = counters.merge(c)

        config = StreamConfig(
            bootstrap=broker.bootstrap,
            echo_topic=TOPIC,
            watermark=1.0,
            trigger=1.0,
            starting_offsets="earliest",
            checkpoint=f"{tmp}/ckpt",
            max_series=max_series,
            master="local[2]",
            shuffle_partitions=4,
        )
        peak = {"rss_mib": 0.0}
        sampling = threading.Event()

        def sample() -> None:  # the job's process tree (driver, JVM, Python workers), no broker
            broker_tree = set(descendants([broker.pid]))
            while not sampling.wait(0.5):
                pids = [p for p in descendants([os.getpid()]) if p not in broker_tree]
                peak["rss_mib"] = max(peak["rss_mib"], sum(map(_rss_mib, pids)))

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        job = StreamJob(config, on_batch=on_batch).start()
        try:
            process_all_available(job)
            first = next(p for p in job.query.recentProgress if p["numInputRows"] > 0)
            # a record of an admitted series far ahead closes the window of the refused rows
            pusher = t0 + 3_600_000_000
            e = Echo("p", "c", "t0", 0, 1, 0, 1, pusher, pusher, None, pusher + 1)
            prod.produce(TOPIC, encode_record(e), partition=0)
            prod.flush()
            deadline = time.monotonic() + 300
            while time.monotonic() < deadline and not counters.bad.get("series_cap"):
                time.sleep(1)
        finally:
            job.stop()
            sampling.set()
            sampler.join()
    ops = first["stateOperators"]
    refused = counters.bad.get("series_cap", 0)
    admitted = min(total, max_series)
    if refused != (total - admitted) * echoes:
        raise SystemExit(f"refused {refused} records, expected {(total - admitted) * echoes}")
    return {
        "series_written": float(total),
        "series_admitted": float(admitted),
        "records": float(first["numInputRows"]),
        "records_refused": float(refused),
        "state_rows": float(sum(op["numRowsTotal"] for op in ops)),
        "state_rows_per_series": sum(op["numRowsTotal"] for op in ops) / admitted,
        "state_memory_mib": sum(op["memoryUsedBytes"] for op in ops) / 2**20,
        "batch_s": first["durationMs"]["triggerExecution"] / 1000,
        "job_peak_rss_mib": peak["rss_mib"],
        "load_avg_1m_end": os.getloadavg()[0],
    }


def _rss_mib(pid: int) -> float:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0.0
    rss = [line.split()[1] for line in status.splitlines() if line.startswith("VmRSS:")]
    return int(rss[0]) / 1024 if rss else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--series", type=int, default=10_000, help="series within the cap")
    parser.add_argument("--beyond", type=int, default=3_000, help="series more (refused)")
    parser.add_argument("--echoes", type=int, default=3, help="echoes per series")
    parser.add_argument(
        "--max-series", type=int, default=StreamConfig.model_fields["max_series"].default
    )
    parser.add_argument("--save", action="store_true", help="write bench/results/")
    args = parser.parse_args()
    result = measure(args.series, args.beyond, args.echoes, args.max_series)
    for name, value in result.items():
        print(f"{name}: {value:.2f}")
    if args.save:
        from bench.machine import write_result

        command = "python -m bench.state_cardinality" + (
            f" --series {args.series} --beyond {args.beyond} --echoes {args.echoes} --save"
        )
        write_result("state_cardinality", {"benchmark": "state_cardinality",
                                           "command": command, **result})  # fmt: skip


if __name__ == "__main__":
    main()
