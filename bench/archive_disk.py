"""The archive's disk use over a simulated day, with and without compaction.

``python -m bench.archive_disk`` writes a day of micro-batches (default trigger 5 s: 17,280
batches) through the stream job's own ``ArchiveWriter``, each batch holding the windows that
close at its time (10s every other batch, 1m every 12th, 1h every 720th) with the rows the job
archives: per probe partition e2e, publish and send_lag; per broker the same three rollups; and
the probe's hiccups. Histograms hold lognormal latencies at ``--rate`` echoes per second per
partition (a pool per resolution, drawn once, so the run measures the archive and not numpy).
Reports files and bytes (apparent and allocated) at the end of the day, the slowest compaction,
and how long reading the whole day back takes; then extrapolates to the retention.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from core.hdr import HdrLayout, SparseHistogram
from core.windows import ALL_PARTITIONS, SeriesKey, WindowHistogram
from streaming import archive as arc
from streaming.config import StreamConfig
from testkit.archive import read_windows

RESOLUTIONS_S = {"10s": 10, "1m": 60, "1h": 3600}
KINDS = ("e2e", "publish", "send_lag")
POOL = 64
#: A day boundary (2026-11-20 00:00 UTC): the simulated day is one date partition.
DAY0_S = 1_795_132_800


def pool(layout: HdrLayout, samples: int, rng: np.random.Generator) -> list[SparseHistogram]:
    """Histograms of ``samples`` latencies: ~2 ms median, a lognormal body and a rare tail."""
    out = []
    for _ in range(POOL):
        v = rng.lognormal(np.log(2000), 0.6, samples)
        tail = rng.random(samples) < 1e-3
        v[tail] *= rng.uniform(5, 50, int(tail.sum()))
        out.append(SparseHistogram.from_values(layout, v.astype(np.int64) + 1))
    return out


def batches(
    partitions: int, brokers: int, rate: float, trigger_s: float, hours: float, seed: int
) -> Any:
    """(batch id, batch time, closed windows) for every micro-batch of the simulated span."""
    layout = HdrLayout()
    rng = np.random.default_rng(seed)
    pools = {r: pool(layout, max(1, int(rate * s)), rng) for r, s in RESOLUTIONS_S.items()}
    hiccups = {r: pool(layout, max(1, s), rng) for r, s in RESOLUTIONS_S.items()}
    n = int(hours * 3600 / trigger_s)
    k = 0
    for b in range(1, n + 1):
        t_s = DAY0_S + b * trigger_s
        windows = []
        for res, span_s in RESOLUTIONS_S.items():
            if int(t_s) % span_s or t_s - span_s < DAY0_S:
                continue
            start_us, end_us = int((t_s - span_s) * 1e6), int(t_s * 1e6)
            p = pools[res]
            for part in range(partitions):
                for kind in KINDS:
                    k += 1
                    windows.append(
                        WindowHistogram(
                            res, start_us, end_us,
                            SeriesKey("prod", "nines.probe", str(part), kind), p[k % POOL],
                        )
                    )  # fmt: skip
            for broker in range(brokers):
                for kind in KINDS:
                    k += 1
                    series = SeriesKey("prod", "nines.probe", ALL_PARTITIONS, kind, str(broker))
                    windows.append(WindowHistogram(res, start_us, end_us, series, p[k % POOL]))
            k += 1
            hic = SeriesKey("prod", "", ALL_PARTITIONS, "hiccup")
            windows.append(WindowHistogram(res, start_us, end_us, hic, hiccups[res][k % POOL]))
        yield b, t_s, windows


def usage(root: Path) -> dict[str, int]:
    """Files, apparent bytes and allocated bytes under ``root``."""
    files = [p for p in root.rglob("*") if p.is_file()]
    return {
        "files": len(files),
        "bytes": sum(p.stat().st_size for p in files),
        "allocated_bytes": sum(p.stat().st_blocks * 512 for p in files),
    }


def memo_encode() -> None:
    """Encode each pooled histogram once: the bytes are the same, so the run measures the
    archive and not the same encodings again.

    (``core.hdr_codec.encode`` writes the counts into ``hdrh``'s array with numpy and lets
    ``hdrh`` encode them in C, no loop per bucket; one row's cost is reported as
    ``encode_ms_per_row``.)
    """
    real, cache = arc.encode, {}

    def encode(h: SparseHistogram) -> bytes:
        if id(h) not in cache:
            cache[id(h)] = (h, real(h))  # the histogram is kept, so its id stays its own
        return cache[id(h)][1]

    arc.encode = encode  # type: ignore[assignment]


def measure(args: argparse.Namespace, compact: bool) -> dict[str, Any]:
    """One simulated span written through ``ArchiveWriter``; what it left on disk."""
    retention_s = StreamConfig(bootstrap="-").archive_retention
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        root = Path(tmp)
        writer = arc.ArchiveWriter(root, retention_s, compact=compact)
        slowest, started = 0.0, time.perf_counter()
        for b, t_s, windows in batches(
            args.partitions, args.brokers, args.rate, args.trigger, args.hours, args.seed
        ):
            t = time.perf_counter()
            writer.write(b, windows, now_s=t_s)
            slowest = max(slowest, time.perf_counter() - t)
        write_s = time.perf_counter() - started
        t = time.perf_counter()
        day = read_windows(root, "10s")
        read_s = time.perf_counter() - t
        return {
            "compact": compact,
            **usage(root),
            "rows_10s": len(day),
            "write_s": round(write_s, 1),
            "slowest_batch_s": round(slowest, 3),
            "read_day_10s_s": round(read_s, 2),
            "retention_days": retention_s / 86_400,
        }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--partitions", type=int, default=12, help="probe partitions (default 12)")
    p.add_argument("--brokers", type=int, default=3)
    p.add_argument("--rate", type=float, default=100.0, help="echoes/s per partition (100)")
    p.add_argument("--trigger", type=float, default=5.0, help="micro-batch interval, s (5)")
    p.add_argument("--hours", type=float, default=24.0)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--dir", default=None, help="where the temporary archives go")
    p.add_argument("--mode", choices=("both", "batch", "compact"), default="both")
    args = p.parse_args()
    h = next(iter(pool(HdrLayout(), int(args.rate * 10), np.random.default_rng(0))))
    t = time.perf_counter()
    arc.encode(h)
    encode_ms = round((time.perf_counter() - t) * 1e3, 1)
    memo_encode()
    modes = {"both": (False, True), "batch": (False,), "compact": (True,)}[args.mode]
    for compact in modes:
        r = measure(args, compact)
        per_day = r["allocated_bytes"] * 24 / args.hours
        r["retention_gib"] = round(per_day * r["retention_days"] / 2**30, 2)
        r["encode_ms_per_row"] = encode_ms
        r["hours"] = args.hours
        print(json.dumps(r), flush=True)


if __name__ == "__main__":
    main()
