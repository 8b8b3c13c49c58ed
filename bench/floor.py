"""The end-to-end floor at 1,000 msgs/s on Apache Kafka and the test brokers, in one run.

``python -m bench.floor`` (``python -m bench.run --only floor``) probes Apache Kafka (``nines
broker --engine kafka``) with one broker and replication factor 1, then with three brokers,
replication factor 3 and ``acks=all`` (the probe's default), then librdkafka's mock cluster and
Tansu, each a fresh ``EmbeddedBroker`` with the same ``python -m monitor probe`` command: 1,000
messages/s of 1 KiB in total over 3 partitions, no injected RTT. The end-to-end latency
``received_us - intended_us`` of every echo intended in the measured interval (after a warm-up)
is the floor of what the probe can measure on that broker; its exact nearest-rank p50, p99,
p99.9 and max are written to ``bench/results/floor.json``. A second pair of runs sets the probe's
``fetch.wait.max.ms`` to 1 ms, which shows how much of each floor is the broker holding a fetch.

The echoes are read while the probe runs (the mock keeps only ~5 MiB per partition) and, after
the probe has stopped, to the log's end as a Fetch finds it (partition EOF): Tansu 0.6.0's
ListOffsets stops short of it (docs/brokers.md).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from bench.machine import write_result
from bench.procstat import cpu_s, start_logged
from bench.samples import quantiles
from core.echo import DEFAULT_ECHO_TOPIC, BadEcho, Echo, decode_record
from monitor.processes import probe_argv
from probes.summary import read_summary

ROOT = Path(__file__).resolve().parents[1]
RATE_TOTAL = 1_000
PARTITIONS = 3
SIZE = 1024
PROBE_TOPIC = "nines.probe"
ECHO_TOPIC = DEFAULT_ECHO_TOPIC
ECHO_PARTITIONS = 2
#: Every run gets these topics; ``kafka-3`` replicates them on three brokers.
TOPICS = ((PROBE_TOPIC, PARTITIONS), (ECHO_TOPIC, ECHO_PARTITIONS))
#: Run name -> (engine, brokers, replication factor or None for the engine's own).
ENGINES: dict[str, tuple[str, int, int | None]] = {
    "kafka": ("kafka", 1, 1),
    "kafka-3": ("kafka", 3, 3),
    "mock": ("mock", 1, None),
    "tansu": ("tansu", 1, None),
}
#: e2e quantiles are also reported per slice of this much intended time.
SLICE_US = 5_000_000
#: (extra ``probe.kafka`` settings) per pair of runs; the probe's consumer waits 10 ms by default.
SETTINGS: tuple[dict[str, str], ...] = ({}, {"fetch.wait.max.ms": "1"})


def run_key(engine: str, kafka: dict[str, str]) -> str:
    """``mock``, ``tansu fetch.wait.max.ms=1``: the result key of one run."""
    return " ".join([engine, *(f"{k}={v}" for k, v in kafka.items())])


def summarise(
    values: Iterable[bytes | None], probe_id: str, w0_us: int, w1_us: int, rate_pp: float
) -> dict[str, Any]:
    """Every echo of ``probe_id`` intended in [w0_us, w1_us): counts and exact quantiles.

    The probe intends seq ``k`` of a partition at its start + ``int(k * 1e6 / rate_pp)``, so the
    seqs that belong in the interval are known from any one echo: an echo that is not there is
    ``missing`` and a repeated one a duplicate; neither can hide in a count. A lost message
    counts in ``lost`` and with its loss timeout as e2e latency, as the monitor counts it.
    The e2e quantiles are given per ``SLICE_US`` of intended time too: a floor that drifts
    during the run shows.
    """
    seqs: dict[int, list[int]] = {}
    starts: dict[int, list[int]] = {}
    slices: dict[int, list[int]] = {}
    e2e: list[int] = []
    send_lag: list[int] = []
    publish: list[int] = []
    lost = bad = 0
    for value in values:
        try:
            rec = decode_record(value)
        except BadEcho:
            bad += 1
            continue
        if not isinstance(rec, Echo) or rec.probe != probe_id:
            continue
        starts.setdefault(rec.partition, []).append(rec.intended_us - int(rec.seq * 1e6 / rate_pp))
        if not w0_us <= rec.intended_us < w1_us:
            continue
        seqs.setdefault(rec.partition, []).append(rec.seq)
        send_lag.append(rec.sent_us - rec.intended_us)
        lost += rec.lost
        latency = rec.latency_us("e2e")  # a lost message's is its loss timeout: never hidden
        if latency is not None:
            e2e.append(latency)
            slices.setdefault((rec.intended_us - w0_us) // SLICE_US, []).append(latency)
        if rec.acked_us:
            publish.append(rec.acked_us - rec.intended_us)
    expected = missing = duplicates = 0
    for p, offsets in starts.items():
        values_, counts = np.unique(np.asarray(offsets, dtype=np.int64), return_counts=True)
        start = int(values_[np.argmax(counts)])
        k = np.arange(int((w1_us - start) * rate_pp / 1e6) + 2)
        at = start + (k * 1e6 / rate_pp).astype(np.int64)
        want = set(k[(at >= w0_us) & (at < w1_us)].tolist())
        got = seqs.get(p, [])
        expected += len(want)
        missing += len(want - set(got))
        duplicates += len(got) - len(set(got))
    return {
        "messages": sum(len(s) for s in seqs.values()),
        "expected": expected,
        "partitions_seen": len(seqs),
        "missing": missing,
        "duplicates": duplicates,
        "lost": lost,
        "bad_records": bad,
        "e2e_us": quantiles(e2e),
        "e2e_us_by_slice": [
            {"from_s": k * SLICE_US / 1e6, "echoes": len(v), **(quantiles(v) or {})}
            for k, v in sorted(slices.items())
        ],
        "send_lag_us": quantiles(send_lag),
        "publish_us": quantiles(publish),
    }


class EchoReader(threading.Thread):
    """Reads the echo topic from its start while the probe runs; ``finish`` reads to the end."""

    def __init__(self, bootstrap: str) -> None:
        super().__init__(name="floor-echoes", daemon=True)
        from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"nines-floor-{os.getpid()}",
                "enable.auto.commit": False,
                "enable.partition.eof": True,
                "fetch.wait.max.ms": 100,
            }
        )
        self.consumer.assign(
            [TopicPartition(ECHO_TOPIC, p, OFFSET_BEGINNING) for p in range(ECHO_PARTITIONS)]
        )
        self.values: list[bytes | None] = []
        self.next_offset = dict.fromkeys(range(ECHO_PARTITIONS), 0)
        self.finishing = threading.Event()
        self.error: str | None = None

    def run(self) -> None:
        from confluent_kafka import KafkaError, TopicPartition

        at_end: set[int] = set()
        restarted = False
        while True:
            if self.finishing.is_set() and not restarted:
                # fetch again from where we are: each partition reports EOF at its real end
                restarted = True
                self.consumer.assign(
                    [TopicPartition(ECHO_TOPIC, p, o) for p, o in self.next_offset.items()]
                )
            for m in self.consumer.consume(2000, 0.2):
                err, p, o = m.error(), int(m.partition() or 0), int(m.offset() or 0)
                if err is None:
                    self.values.append(m.value())
                    self.next_offset[p] = o + 1
                elif err.code() == KafkaError._PARTITION_EOF:
                    if restarted:
                        at_end.add(p)
                else:
                    self.error = err.str()
            if restarted and len(at_end) == ECHO_PARTITIONS:
                return

    def finish(self, timeout_s: float) -> list[bytes | None]:
        """Read every echo written so far, stop, and return them all."""
        self.finishing.set()
        self.join(timeout_s)
        if self.is_alive():
            raise RuntimeError(f"echo topic not read to its end in {timeout_s:g} s")
        self.consumer.close()
        return self.values


def run_engine(
    name: str, kafka: dict[str, str], workdir: Path, warmup_s: float, measure_s: float
) -> dict[str, Any]:
    """One probe process at RATE_TOTAL msgs/s against a fresh cluster (``ENGINES[name]``)."""
    from testbroker import EmbeddedBroker

    engine, brokers, rf = ENGINES[name]
    topics = [(t, p) if rf is None else (t, p, rf) for t, p in TOPICS]
    probe_id = f"floor-{name}-{len(kafka)}"
    config = workdir / f"{probe_id}.yaml"
    config.write_text(json.dumps({"probe": {"kafka": kafka}}))  # JSON is YAML
    summary = workdir / f"{probe_id}.summary.json"
    summary.unlink(missing_ok=True)
    tail_s = 3.0
    run_s = warmup_s + measure_s + tail_s
    cluster = EmbeddedBroker(engine=engine, brokers=brokers, topics=topics)  # type: ignore[arg-type]
    with cluster as broker:
        # the broker's CPU: every process serving it (Kafka: one JVM per broker)
        pids = [broker.pid] if engine != "kafka" else [
            broker.broker_pid(b) for b in range(1, brokers + 1)]  # fmt: skip

        def broker_cpu_s() -> float:
            return sum(cpu_s(pid) for pid in pids)

        reader = EchoReader(broker.bootstrap)
        reader.start()
        cmd = probe_argv(
            broker.bootstrap, probe_id, "--rate", repr(RATE_TOTAL / PARTITIONS),
            "--size", str(SIZE), "--cluster", "bench", "--duration", f"{run_s:g}s",
            "--config", str(config), "--summary-file", str(summary),
        )  # fmt: skip
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
        proc, log, started, stderr_reader = start_logged(cmd, ROOT, env, " probing ")
        try:
            if not started.wait(60):
                raise RuntimeError(f"probe did not start: {' | '.join(log[-5:])}")
            time.sleep(warmup_s)
            w0_us = time.time_ns() // 1000
            cpu0 = {"probe": cpu_s(proc.pid), "broker": broker_cpu_s()}
            t0 = time.monotonic()
            w1_us = w0_us + int(measure_s * 1e6)  # whole slices; the sleep ends a bit later
            time.sleep(measure_s)
            cpu1 = {"probe": cpu_s(proc.pid), "broker": broker_cpu_s()}
            cpu_wall_s = time.monotonic() - t0
            load = os.getloadavg()[0]
            code = proc.wait(tail_s + 60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            stderr_reader.join(5)
        values = reader.finish(60)
    out = summarise(values, probe_id, w0_us, w1_us, RATE_TOTAL / PARTITIONS)
    unresolved = read_summary(summary).get("unresolved")
    return {
        "engine": engine,
        "brokers": brokers,
        "replication_factor": rf,
        "kafka_settings": kafka,
        "rate_total_per_s": RATE_TOTAL,
        "partitions": PARTITIONS,
        "size_bytes": SIZE,
        "measured_s": round((w1_us - w0_us) / 1e6, 2),
        **out,
        "probe_unresolved_at_stop": unresolved,
        "cpu_pct_of_core": {k: round((cpu1[k] - cpu0[k]) / cpu_wall_s * 100, 1) for k in cpu0},
        "reader_error": reader.error,
        "probe_exit_code": code,
        "probe_log_tail": log[-3:],
        "load_avg_1m": round(load, 2),
    }


def run_floor(quick: bool = False, workdir: Path | None = None) -> dict[str, Any]:
    """Every engine with every setting, in one run; writes ``bench/results/floor.json``."""
    import tempfile

    warmup_s, measure_s = (2.0, 8.0) if quick else (3.0, 20.0)
    started = time.perf_counter()
    runs: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="nines-floor-") as tmp:
        for kafka in SETTINGS:
            for engine in ENGINES:
                key = run_key(engine, kafka)
                print(f"floor: {key} ...", flush=True)
                try:
                    runs[key] = run_engine(engine, kafka, workdir or Path(tmp), warmup_s, measure_s)
                except Exception as exc:  # keep the other runs; the report shows the reason
                    runs[key] = {"engine": engine, "kafka_settings": kafka, "error": f"{exc}"}
                print(f"floor: {key} {json.dumps(runs[key].get('e2e_us'))}", flush=True)
    payload = {
        "runs": runs,
        "quick": quick,
        "wall_s": round(time.perf_counter() - started, 1),
        "method": (
            f"one `python -m monitor probe` process per run, {RATE_TOTAL:,} msgs/s of {SIZE} B "
            f"in total over {PARTITIONS} partitions, against a fresh one-broker `nines broker` "
            f"of each engine in turn (same topics; kafka-3: three brokers, replication factor 3, "
            f"acks=all; no injected RTT); exact nearest-rank "
            f"quantiles of received_us - intended_us over every echo intended in the middle "
            f"{measure_s:g} s after a {warmup_s:g} s warm-up"
        ),
    }
    write_result("floor", payload)
    return payload


def main(argv: list[str] | None = None) -> int:
    """CLI: ``python -m bench.floor [--quick]``."""
    ap = argparse.ArgumentParser(prog="python -m bench.floor", description=__doc__)
    ap.add_argument("--quick", action="store_true", help="8 s per run instead of 20 s")
    args = ap.parse_args(argv)
    result = run_floor(quick=args.quick)
    failed = [k for k, r in result["runs"].items() if "error" in r]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
