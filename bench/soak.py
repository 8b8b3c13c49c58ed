"""Soak: one probe for hours against the embedded broker; memory, CPU and every echo accounted.

``python -m bench.soak --hours 2`` (``make soak``) starts a fresh ``EmbeddedBroker`` (its own
process, 3 brokers, ``nines.probe`` with one partition per broker) and ``python -m monitor
probe`` in a process of its own at ``--rate`` messages/s in total of ``--size`` bytes. This
process consumes ``nines.echoes`` as it is written (the embedded broker keeps only a few MiB per
partition) and checks every echo record against the schedule:

- every (partition, seq) intended before the last loss timeout has exactly one echo; seqs are
  tracked in a bitmap per partition, so a missing or duplicated echo cannot hide in a count;
- per interval (``--interval``, default 5 min): echoes, lost, send lag and end-to-end latency
  (exact nearest-rank quantiles of that interval's values), the probe's own hiccup max, its CPU
  (utime + stime of all its threads, from ``/proc``) and its RSS.

The result is rewritten to ``bench/results/soak.json`` after every interval, so an interrupted
soak still leaves its numbers; ``complete`` says whether it ran to the end. The memory verdict is
the least-squares RSS slope over the second half of the run, in MiB per hour.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from bench.machine import RESULTS_DIR, machine_facts
from bench.procstat import cpu_s, rss_mib
from bench.samples import quantiles
from core.echo import DEFAULT_ECHO_TOPIC, BadEcho, Hiccup, decode_record

ROOT = Path(__file__).resolve().parents[1]
RESULT = RESULTS_DIR / "soak.json"
ECHO_TOPIC = DEFAULT_ECHO_TOPIC
LOSS_TIMEOUT_S = 30.0  # the probe's default; seqs younger than this may still be unresolved


@dataclass
class SeqBook:
    """Which seqs of each partition have had an echo (a bitmap that grows with the run)."""

    seen: dict[int, bytearray] = field(default_factory=dict)
    duplicates: int = 0
    #: The highest seq seen per partition: every seq below it is expected.
    highest: dict[int, int] = field(default_factory=dict)

    def add(self, partition: int, seq: int) -> None:
        self.highest[partition] = max(self.highest.get(partition, -1), seq)
        bits = self.seen.setdefault(partition, bytearray())
        if seq >= len(bits):
            bits.extend(b"\0" * max(seq + 1 - len(bits), 65536))
        if bits[seq]:
            self.duplicates += 1
        bits[seq] = 1

    def missing_below(self, limits: dict[int, int]) -> int:
        """Seqs below each partition's limit that have no echo."""
        missing = 0
        for p, limit in limits.items():
            bits = self.seen.get(p, bytearray())
            covered = np.frombuffer(bytes(bits[:limit]), dtype=np.uint8)
            missing += limit - int(covered.sum())
        return missing


@dataclass
class Interval:
    """What one interval of the soak saw."""

    echoes: int = 0
    lost: int = 0
    send_lag: list[int] = field(default_factory=list)
    e2e: list[int] = field(default_factory=list)
    hiccup_max_us: int = 0


def soak(hours: float, rate: float, size: int, interval_s: float) -> dict[str, Any]:
    """Run the soak; return (and keep writing) the result."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    from testbroker import EmbeddedBroker

    duration_s = hours * 3600
    partitions = 3
    started = time.time()
    rows: list[dict[str, Any]] = []
    book = SeqBook()
    bad: dict[str, int] = {}
    totals = {"echoes": 0, "lost": 0, "resets": 0}
    result: dict[str, Any] = {}

    def write(complete: bool, extra: dict[str, Any] | None = None) -> None:
        result.update(
            {
                "complete": complete,
                "hours_planned": hours,
                "rate_total_per_s": rate,
                "size_bytes": size,
                "interval_s": interval_s,
                "elapsed_s": round(time.time() - started, 1),
                "intervals": rows,
                "echoes": totals["echoes"],
                "lost": totals["lost"],
                "duplicates": book.duplicates,
                "bad_records": bad,
                "consumer_offset_resets": totals["resets"],
                "machine": machine_facts(),
                "method": __doc__.split("\n\n")[1].replace("\n", " ") if __doc__ else "",
                **(extra or {}),
            }
        )
        RESULTS_DIR.mkdir(parents=True, exist_ok=True)
        tmp = RESULT.with_suffix(".tmp")
        tmp.write_text(json.dumps(result, indent=2) + "\n")
        tmp.replace(RESULT)

    with EmbeddedBroker() as broker:
        consumer = Consumer(
            {
                "bootstrap.servers": broker.bootstrap,
                "group.id": "nines-soak",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "fetch.wait.max.ms": 100,
            }
        )
        md = consumer.list_topics(ECHO_TOPIC, timeout=10)
        consumer.assign(
            [
                TopicPartition(ECHO_TOPIC, p, OFFSET_BEGINNING)
                for p in md.topics[ECHO_TOPIC].partitions
            ]
        )
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
        cmd = [
            sys.executable, "-m", "monitor", "probe", "--bootstrap", broker.bootstrap,
            "--rate", repr(rate / partitions), "--size", str(size), "--probe-id", "soak",
            "--cluster", "soak", "--duration", f"{duration_s:g}s",
        ]  # fmt: skip
        log_path = RESULTS_DIR / "soak-probe.log"
        RESULTS_DIR.mkdir(parents=True, exist_ok=True)
        with log_path.open("w") as log:
            proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
        t_start = time.monotonic()
        cpu_prev, t_prev = cpu_s(proc.pid), t_start
        cur = Interval()
        next_row = t_start + interval_s
        while True:
            done = proc.poll() is not None
            for m in consumer.consume(2000, 0.5):
                if m.error():
                    totals["resets"] += "out of range" in m.error().str().lower()
                    continue
                try:
                    rec = decode_record(m.value() or b"")
                except BadEcho as exc:
                    bad[exc.args[0]] = bad.get(exc.args[0], 0) + 1
                    continue
                if isinstance(rec, Hiccup):
                    cur.hiccup_max_us = max(cur.hiccup_max_us, rec.max_us)
                    continue
                book.add(rec.partition, rec.seq)
                cur.echoes += 1
                cur.send_lag.append(rec.sent_us - rec.intended_us)
                if rec.lost:
                    cur.lost += 1
                elif rec.received_us is not None:
                    cur.e2e.append(rec.received_us - rec.intended_us)
            now = time.monotonic()
            if now >= next_row or done:
                cpu_now = cpu_s(proc.pid) if not done else None
                rows.append(
                    {
                        "t_min": round((now - t_start) / 60, 2),
                        "rss_mib": round(rss_mib(proc.pid), 2) if not done else None,
                        "cpu_pct_of_core": None
                        if cpu_now is None
                        else round((cpu_now - cpu_prev) / (now - t_prev) * 100, 2),
                        "echoes": cur.echoes,
                        "lost": cur.lost,
                        "send_lag_us": quantiles(cur.send_lag),
                        "e2e_us": quantiles(cur.e2e),
                        "hiccup_max_us": cur.hiccup_max_us,
                        "load_avg_1m": round(os.getloadavg()[0], 2),
                    }
                )
                totals["echoes"] += cur.echoes
                totals["lost"] += cur.lost
                cpu_prev, t_prev, cur = cpu_now or cpu_prev, now, Interval()
                next_row = now + interval_s
                write(complete=False)
                print(json.dumps(rows[-1]), flush=True)
            if done:
                break
        # the probe has flushed its last echoes; read to the end of the echo topic
        idle_since = time.monotonic()
        while time.monotonic() - idle_since < 5:
            msgs = consumer.consume(2000, 0.5)
            if msgs:
                idle_since = time.monotonic()
            for m in msgs:
                if m.error():
                    continue
                try:
                    rec = decode_record(m.value() or b"")
                except BadEcho:
                    continue
                if not isinstance(rec, Hiccup):
                    book.add(rec.partition, rec.seq)
                    totals["echoes"] += 1
                    totals["lost"] += bool(rec.lost)
        consumer.close()
        code = proc.returncode
    # every seq up to the highest one seen must have its echo (the probe drained on exit)
    limits = {p: s + 1 for p, s in book.highest.items()}
    rss = [(r["t_min"], r["rss_mib"]) for r in rows if r["rss_mib"] is not None]
    half = [(t, m) for t, m in rss if t >= rss[-1][0] / 2] if rss else []
    slope = float(np.polyfit(*zip(*half, strict=True), 1)[0] * 60) if len(half) >= 2 else None
    write(
        complete=True,
        extra={
            "probe_exit_code": code,
            "expected": sum(limits.values()),
            "missing": book.missing_below(limits),
            "rss_mib_first": rss[0][1] if rss else None,
            "rss_mib_last": rss[-1][1] if rss else None,
            "rss_mib_max": max(m for _, m in rss) if rss else None,
            "rss_slope_mib_per_hour_second_half": round(slope, 3) if slope is not None else None,
            "probe_log_tail": log_path.read_text().splitlines()[-3:],
        },
    )
    return result


def main(argv: list[str] | None = None) -> int:
    """CLI: ``[--hours H] [--rate R] [--size B] [--interval S]``."""
    ap = argparse.ArgumentParser(prog="python -m bench.soak", description=__doc__.split("\n")[0])
    ap.add_argument("--hours", type=float, default=2.0)
    ap.add_argument("--rate", type=float, default=1000.0, help="messages/s over all partitions")
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--interval", type=float, default=300.0, help="seconds per row")
    args = ap.parse_args(argv)
    out = soak(args.hours, args.rate, args.size, args.interval)
    print(
        f"soak: {out['echoes']:,} echoes, {out['missing']} missing, {out['duplicates']} duplicate, "
        f"RSS {out['rss_mib_first']} -> {out['rss_mib_last']} MiB "
        f"(slope {out['rss_slope_mib_per_hour_second_half']} MiB/h), exit {out['probe_exit_code']}"
    )
    ok = out["missing"] == 0 and out["duplicates"] == 0 and out["probe_exit_code"] == 0
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
