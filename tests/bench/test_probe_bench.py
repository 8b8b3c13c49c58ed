"""The probe's own cost: send lag, CPU and memory at 1,000 and 10,000 messages/s of 1 KiB.

Writes ``bench/results/probe.json``. For each total rate a fresh ``EmbeddedBroker`` (its own
process, default topics: ``nines.probe`` with 3 partitions, one per broker) is probed by
``python -m monitor probe`` in a process of its own, so its CPU is read exactly from
``/proc/<pid>/stat`` (utime + stime, all threads) over the measured interval, start-up and a
warm-up excluded. Its RSS (``VmRSS``) is sampled every second. The echo records are consumed
from ``nines.echoes`` while the probe runs (the broker keeps only ~5 MiB per partition, and the
echoes of one probe share a partition) and spooled raw to a file; they are decoded with
``decode_record`` afterwards, so the reading costs this process little while it is measured.

During the measured interval ``bench.control_hiccup`` runs beside the probe: an idle process
sleeping 1 ms at a time, whose oversleep is the machine's own wake-up jitter at that moment (the
floor under the probe's send lag; jHiccup's control process).

Every message intended in the measured interval must have exactly one echo and none may be
lost (asserted, after the JSON is written). At 10,000 msgs/s the broker's ~5 MiB per partition
hold only ~1.5 s of probe messages: a probe that falls further behind than that (a saturated
machine) has its consumer reset past deleted offsets (``consumer_offset_resets``) and loses
those messages; above the target rate that is reported (a limit of the test broker), not
asserted. The send lag (``sent_us - intended_us``) and the
end-to-end floor (``received_us - intended_us``, no injected RTT) are exact nearest-rank
quantiles of the raw values. Targets (from the issue) apply at 1,000 msgs/s and are reported,
not asserted: the machine is shared. ``NINES_BENCH_QUICK=1`` shortens every run to ~10 s.
"""

from __future__ import annotations

import json
import os
import platform
import struct
import subprocess
import sys
import threading
import time
import traceback
import urllib.request
from array import array
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from kafka_cluster import consumer

from bench.procstat import cpu_s, cpu_s_by_thread, rss_mib, start_logged
from bench.samples import quantiles
from core.echo import BadEcho, Hiccup
from core.echo_v2 import decode_message
from monitor.processes import probe_argv
from testbroker import EmbeddedBroker
from testbroker.ports import free_port

pytestmark = pytest.mark.bench

ROOT = Path(__file__).resolve().parents[2]
RESULT = ROOT / "bench" / "results" / "probe.json"
QUICK = os.environ.get("NINES_BENCH_QUICK") == "1"
#: The runs: (result key, total messages per second over all partitions, the probe's extra
#: ``kafka`` settings). The last isolates the embedded broker's part of the end-to-end floor:
#: librdkafka's mock holds a fetch that finds no data for the whole ``fetch.wait.max.ms``
#: (real Kafka answers as soon as data arrives), which adds up to that wait (10 ms by default)
#: to every e2e latency measured on it.
RUNS: tuple[tuple[str, int, dict[str, str]], ...] = (
    ("1000", 1_000, {}),
    ("10000", 10_000, {}),
    ("1000 fetch.wait.max.ms=1", 1_000, {"fetch.wait.max.ms": "1"}),
)
PARTITIONS = 3  # nines.probe on the default embedded cluster: one partition per broker
SIZE = 1024
ECHO_TOPIC = "nines.echoes"
ECHO_PARTITIONS = 2
#: The probe runs WARMUP_S + MEASURE_S + TAIL_S; only the middle interval is measured.
WARMUP_S = 2.0 if QUICK else 5.0
MEASURE_S = 6.0 if QUICK else 50.0
TAIL_S = 2.0 if QUICK else 5.0
TARGETS = {"rate": 1_000, "send_lag_p999_us": 1_000, "cpu_pct_of_core": 15.0}
#: The probe's own counters (from its /metrics) kept in the result: all but sent should be 0.
COUNTERS = (
    "sent",
    "lost",
    "late_after_loss",
    "duplicates",
    "out_of_order",
    "send_errors",
    "echo_dropped",
    "in_flight",
)
_LEN = struct.Struct(">I")


def now_us() -> int:
    """Wall-clock microseconds (the probe's clock is anchored to wall time at its start)."""
    return time.time_ns() // 1000


def dirty_sources() -> list[str]:
    """Files of the probe's code that differ from the commit (the code measured is the tree's)."""
    out = subprocess.run(
        ["git", "status", "--porcelain", "--", "probes", "monitor"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    return [line[3:] for line in out.stdout.splitlines()]


def probe_counters(port: int) -> dict[str, float] | None:
    """The probe's own anomaly counters from its /metrics, summed over partitions."""
    try:
        body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2).read()
    except OSError:
        return None
    out: dict[str, float] = {}
    for line in body.decode().splitlines():
        name, _, value = line.rpartition(" ")
        name = name.split("{", 1)[0].removeprefix("nines_probe_").removesuffix("_total")
        if line.startswith("nines_probe_") and name in COUNTERS:
            out[name] = out.get(name, 0) + float(value)
    return out


def intended_schedule(rate_pp: float, n_partitions: int, seqs: np.ndarray) -> np.ndarray:
    """Offsets from t0 (µs) of message ``seq`` of partition ``p`` (rows), as documented:
    k / rate, partitions staggered by 1 / (rate × n)."""
    out = np.empty((n_partitions, seqs.size), dtype=np.int64)
    for p in range(n_partitions):
        offset = int(p * 1e6 / (rate_pp * n_partitions))
        out[p] = offset + (seqs.astype(np.float64) * 1e6 / rate_pp).astype(np.int64)
    return out


class EchoSpool(threading.Thread):
    """Consumes the echo topic from the beginning and appends each raw value to a file."""

    def __init__(self, bootstrap: str, path: Path) -> None:
        super().__init__(name="echo-spool", daemon=True)
        from confluent_kafka import OFFSET_BEGINNING, TopicPartition

        self.path, self.bootstrap = path, bootstrap
        self.consumer = consumer(bootstrap, **{"fetch.wait.max.ms": 100})
        self.consumer.assign(
            [TopicPartition(ECHO_TOPIC, p, OFFSET_BEGINNING) for p in range(ECHO_PARTITIONS)]
        )
        self.next_offset = dict.fromkeys(range(ECHO_PARTITIONS), 0)
        self.count = 0
        self.stopping = threading.Event()

    def run(self) -> None:
        with self.path.open("wb") as f:
            while not self.stopping.is_set():
                for m in self.consumer.consume(2000, 0.2):
                    if m.error():
                        continue
                    value = m.value() or b""
                    f.write(_LEN.pack(len(value)))
                    f.write(value)
                    self.next_offset[m.partition()] = m.offset() + 1
                    self.count += 1

    def drain(self, timeout_s: float) -> None:
        """Read up to the current end of the echo topic, then stop."""
        from confluent_kafka import TopicPartition

        # a client of its own: the spool's consumer is busy in consume() on another thread
        probe = consumer(self.bootstrap)
        highs = {
            p: probe.get_watermark_offsets(TopicPartition(ECHO_TOPIC, p), timeout=10)[1]
            for p in range(ECHO_PARTITIONS)
        }
        probe.close()
        deadline = time.monotonic() + timeout_s
        while any(self.next_offset[p] < h for p, h in highs.items()):
            if time.monotonic() > deadline:
                break
            time.sleep(0.1)
        self.stopping.set()
        self.join(10)
        self.consumer.close()
        self.highs = highs

    def records(self) -> Iterator[bytes]:
        """Every spooled value, in consumption order."""
        with self.path.open("rb") as f:
            while head := f.read(_LEN.size):
                (n,) = _LEN.unpack(head)
                yield f.read(n)


def run_rate(
    total_rate: int, spool_dir: Path, kafka: dict[str, str] | None = None
) -> dict[str, Any]:
    """One probe process at ``total_rate`` msgs/s against a fresh embedded broker."""
    rate_pp = total_rate / PARTITIONS
    probe_id = f"bench-{total_rate}-{len(kafka or {})}"
    config = spool_dir / f"probe-{probe_id}.yaml"
    config.write_text(json.dumps({"probe": {"kafka": kafka or {}}}))  # JSON is YAML
    port = free_port()
    run_s = WARMUP_S + MEASURE_S + TAIL_S
    with EmbeddedBroker() as broker:
        spool = EchoSpool(broker.bootstrap, spool_dir / f"echoes-{probe_id}.bin")
        spool.start()
        cmd = probe_argv(
            broker.bootstrap, probe_id, "--rate", repr(rate_pp), "--size", str(SIZE),
            "--cluster", "bench", "--duration", f"{run_s:g}s", "--metrics-port", str(port),
            "--config", str(config),
        )  # fmt: skip
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
        launched = time.monotonic()
        proc, log, started, reader = start_logged(cmd, ROOT, env, " probing ")
        try:
            if not started.wait(60):
                raise RuntimeError(f"probe did not start: {' | '.join(log[-5:])}")
            startup_s = time.monotonic() - launched
            t_start = time.monotonic()
            rss: list[tuple[float, float]] = [(0.0, rss_mib(proc.pid))]

            def tick_until(t_rel: float) -> None:
                while True:
                    left = t_start + t_rel - time.monotonic()
                    if left <= 0:
                        return
                    time.sleep(min(left, 1.0 - (time.monotonic() - t_start) % 1.0))
                    if proc.poll() is not None:
                        raise RuntimeError(f"probe exited early: {' | '.join(log[-5:])}")
                    t = time.monotonic() - t_start
                    if t - rss[-1][0] >= 0.95:
                        rss.append((t, rss_mib(proc.pid)))

            tick_until(WARMUP_S)
            w0_mono, w0_us = time.monotonic(), now_us()
            cpu0, bcpu0 = cpu_s(proc.pid), cpu_s(broker.pid)
            threads0 = cpu_s_by_thread(proc.pid)
            control = subprocess.Popen(
                [sys.executable, "-m", "bench.control_hiccup", f"{MEASURE_S:g}"],
                cwd=ROOT,
                env=env,
                stdout=subprocess.PIPE,
                text=True,
            )
            tick_until(WARMUP_S + MEASURE_S)
            w1_mono, w1_us = time.monotonic(), now_us()
            cpu1, bcpu1 = cpu_s(proc.pid), cpu_s(broker.pid)
            threads1 = cpu_s_by_thread(proc.pid)
            control_out, _ = control.communicate(timeout=30)
            control_oversleep = json.loads(control_out) if control.returncode == 0 else None
            rss.append((w1_mono - t_start, rss_mib(proc.pid)))
            load_end = os.getloadavg()[0]
            counters = {"window_end": probe_counters(port), "last": None}
            while proc.poll() is None and time.monotonic() < t_start + run_s + 60:
                counters["last"] = probe_counters(port) or counters["last"]
                time.sleep(1.0)
            code = proc.wait(5)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        reader.join(5)
        print(f"probe {total_rate}/s: exit {code}, {spool.count} records read", flush=True)
        spool.drain(timeout_s=60)
        print(f"probe {total_rate}/s: drained {spool.count} records", flush=True)

    # -- decode and check ---------------------------------------------------------------------
    fields = ("partition", "seq", "intended_us", "sent_us", "acked_us", "received_us", "lost")
    col: dict[str, array[int]] = {name: array("q") for name in fields}
    hiccup_max = 0
    bad: dict[str, int] = {}
    for value in spool.records():
        try:
            recs = decode_message(value)
        except BadEcho as exc:  # counted (and asserted to be none) rather than fatal
            bad[str(exc)] = bad.get(str(exc), 0) + 1
            continue
        for rec in recs:
            if rec.probe != probe_id:
                continue
            if isinstance(rec, Hiccup):
                if rec.end_us > w0_us and rec.start_us < w1_us:
                    hiccup_max = max(hiccup_max, rec.max_us)
                continue
            for name in fields:
                col[name].append(int(getattr(rec, name) or 0))
    cols = {name: np.frombuffer(col[name], dtype=np.int64) for name in fields}
    lost_all = cols["lost"].astype(bool)

    # t0 of the schedule from the echoes themselves: every echo must agree on it
    seq_max = int(cols["seq"].max()) if cols["seq"].size else 0
    n_seqs = max(seq_max + 2, int(rate_pp * run_s) + 10)  # past the end even if echoes are missing
    offsets = intended_schedule(rate_pp, PARTITIONS, np.arange(n_seqs))
    t0s = cols["intended_us"] - offsets[cols["partition"], cols["seq"]]
    t0_values, t0_counts = np.unique(t0s, return_counts=True)
    t0 = int(t0_values[np.argmax(t0_counts)]) if t0_values.size else w0_us
    expected = {
        (p, int(s))
        for p in range(PARTITIONS)
        for s in np.nonzero((t0 + offsets[p] >= w0_us) & (t0 + offsets[p] < w1_us))[0]
    }
    inside = (cols["intended_us"] >= w0_us) & (cols["intended_us"] < w1_us)
    keys = list(zip(cols["partition"][inside].tolist(), cols["seq"][inside].tolist(), strict=True))
    got = set(keys)
    missing_keys = sorted(expected - got)[:20]
    ok = inside & ~lost_all
    acked = ok & (cols["acked_us"] > 0)
    send_lag = cols["sent_us"][inside] - cols["intended_us"][inside]
    e2e = cols["received_us"][ok] - cols["intended_us"][ok]
    publish = cols["acked_us"][acked] - cols["intended_us"][acked]

    # RSS slope over the second half of the run (least squares, MiB per minute)
    ts = np.array([t for t, _ in rss])
    ms = np.array([m for _, m in rss])
    half = ts >= ts[-1] / 2
    slope = float(np.polyfit(ts[half], ms[half], 1)[0] * 60) if half.sum() >= 2 else float("nan")
    wall_s = w1_mono - w0_mono
    return {
        "rate_total_per_s": total_rate,
        "kafka_settings": kafka or {},
        "rate_per_partition": rate_pp,
        "partitions": PARTITIONS,
        "size_bytes": SIZE,
        "duration_s": round(wall_s, 2),
        "warmup_s": WARMUP_S,
        "probe_run_s": run_s,
        "probe_startup_s": round(startup_s, 2),
        "probe_exit_code": code,
        "messages": len(keys),
        "expected": len(expected),
        "missing": len(expected - got),
        "missing_first": [
            {
                "partition": p,
                "seq": q,
                "intended_s_after_start": round(float(offsets[p, q]) / 1e6, 6),
            }
            for p, q in missing_keys
        ],
        "probe_counters": counters,
        "unexpected": len(got - expected),
        "duplicates": len(keys) - len(got),
        "lost": int((inside & lost_all).sum()),
        "bad_records": bad,
        "echoes_total": int(cols["seq"].size),
        "schedule_starts_seen": int(t0_values.size),
        "send_lag_us": quantiles(send_lag),
        "e2e_us": quantiles(e2e),
        "publish_us": quantiles(publish),
        "send_lag_over_1ms": int((send_lag > 1000).sum()),
        "control_oversleep_us": control_oversleep,
        "hiccup_max_us": int(hiccup_max),
        "cpu_pct_of_core": round((cpu1 - cpu0) / wall_s * 100, 2),
        "broker_cpu_pct_of_core": round((bcpu1 - bcpu0) / wall_s * 100, 2),
        "cpu_pct_by_thread": dict(
            sorted(
                (
                    (name, round((t - threads0.get(name, 0.0)) / wall_s * 100, 2))
                    for name, t in threads1.items()
                    if t > threads0.get(name, 0.0)
                ),
                key=lambda kv: -kv[1],
            )
        ),
        "rss_mib_start": round(rss[0][1], 2),
        "rss_mib_end": round(rss[-1][1], 2),
        "rss_mib_max": round(float(ms.max()), 2),
        "rss_slope_mib_per_min": round(slope, 3),
        "rss_samples_mib": [round(m, 2) for m in ms.tolist()],
        "load_avg_1m_at_end": round(load_end, 2),
        "consumer_offset_resets": sum("Offset out of range" in line for line in log),
        "probe_log_tail": log[-5:],
    }


def test_probe_send_lag_cpu_and_memory(tmp_path: Path) -> None:
    started = time.perf_counter()
    rates: dict[str, dict[str, Any]] = {}
    for key, rate, kafka in RUNS:
        try:
            rates[key] = run_rate(rate, tmp_path, kafka)
        except Exception as exc:  # keep the other rate's numbers; fail below, after the JSON
            traceback.print_exc()
            rates[key] = {
                "rate_total_per_s": rate,
                "kafka_settings": kafka,
                "error": f"{type(exc).__name__}: {exc}",
            }
    base = rates[str(TARGETS["rate"])]
    p999 = (base.get("send_lag_us") or {}).get("p999")
    cpu = base.get("cpu_pct_of_core")
    lag_ok = p999 is not None and p999 <= TARGETS["send_lag_p999_us"]
    cpu_ok = cpu is not None and cpu <= TARGETS["cpu_pct_of_core"]
    result = {
        "rates": rates,
        "targets": {
            **TARGETS,
            "note": "at 1,000 msgs/s total of 1 KiB on this 2-core machine; reported, not asserted",
        },
        "met": {"send_lag_p999": lag_ok, "cpu": cpu_ok, "all": lag_ok and cpu_ok},
        "quick": QUICK,
        "wall_s": round(time.perf_counter() - started, 1),
        "method": (
            "one `python -m monitor probe` process per rate against a fresh EmbeddedBroker "
            "(3 brokers, 3 probe partitions, no injected RTT); CPU = Δ(utime+stime) of the probe "
            f"process over the middle {MEASURE_S:g} s after a {WARMUP_S:g} s warm-up; RSS "
            "sampled every second from the probe's start, slope fitted over the second half; "
            "quantiles exact nearest-rank over every echo intended in the measured interval; "
            "echoes consumed by the test process while the probe runs"
        ),
        "machine": {
            "cpus": os.cpu_count(),
            "uncommitted_probe_sources": dirty_sources(),
            "python": platform.python_version(),
            "load_avg_1m_at_end": round(os.getloadavg()[0], 2),
            "note": "2 cores shared with other work; probe, broker and echo reader all on them",
        },
    }
    RESULT.parent.mkdir(parents=True, exist_ok=True)
    RESULT.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "rates"}, indent=2))
    for r in rates.values():
        print({k: v for k, v in r.items() if k not in ("rss_samples_mib", "probe_log_tail")})
    for rate, r in rates.items():
        assert "error" not in r, (rate, r["error"])
        assert not r["bad_records"], (rate, r["bad_records"])
        assert r["schedule_starts_seen"] == 1, (rate, r["schedule_starts_seen"])
        assert r["probe_exit_code"] == 0, (rate, r["probe_log_tail"])
        assert r["expected"] > 0.9 * r["rate_total_per_s"] * MEASURE_S, (rate, r["expected"])
        assert r["unexpected"] == 0 and r["duplicates"] == 0, (rate, r)
        if r["rate_total_per_s"] > TARGETS["rate"] and r["consumer_offset_resets"]:
            # Above the target rate on a saturated machine the probe's consumer can fall behind
            # the embedded broker's ~5 MiB per partition and be reset past deleted offsets: the
            # skipped messages are lost or missing because of the test broker, and reported
            # (the report says so), not asserted.
            continue
        assert r["missing"] == 0, (rate, r)
        assert r["lost"] == 0, (rate, r["lost"])
        assert r["messages"] == r["expected"], (rate, r["messages"], r["expected"])
