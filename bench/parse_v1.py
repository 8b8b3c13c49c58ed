"""Schema-v1 parse and marking in a read task, per echo, on one core (issue 24).

``python -m bench.parse_v1 [--echoes N] [--runs R] [--profile]`` encodes ``bench.aggregation``'s
seeded echoes as v1 records (``bench.e2e.encoded``: 12 series, as the e2e run) and does what
``streaming.source`` does with each fetch of ``FETCH`` Kafka values: ``parse_messages``, then
``mark_future`` and ``mark_late``. It prints the median and the fastest of ``R`` runs in µs per
echo for each stage, for the parser as the job runs it and for its JSON-reader path alone (what
a record not in the probes' layout costs, and what every v1 echo would cost without the
template parser), with the load average: this machine is shared. The two paths alternate run by
run, so both see the same load. ``--write`` also writes ``bench/results/parse_v1.json``, which
docs/benchmarks.md reports (``bench.report_cited``).
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

import pyarrow as pa

from bench.e2e import SERIES, encoded
from bench.machine import write_result
from core.windows import WindowSpec
from streaming.marks import mark_future, mark_late
from streaming.parse import parse_messages
from streaming.parse.v1_json import parse_json

#: Kafka values per parse call, as ``streaming.consume``'s fetches.
FETCH = 10_000
T0_US = 1_800_000_000_000_000
MAX_SKEW_US = 10_000_000


def run(
    fetches: list[tuple[list[bytes], list[int]]],
    parse: Callable[[Sequence[bytes | None]], Any],
    windows: WindowSpec,
) -> dict[str, float]:
    """Seconds spent in each stage over every fetch."""
    spent = {"parse": 0.0, "mark_future": 0.0, "mark_late": 0.0}
    for values, stamps in fetches:
        t0 = time.perf_counter()
        parsed, index = parse(values)
        t1 = time.perf_counter()
        kafka_us = pa.array(stamps, pa.int64()).take(pa.array(index))
        marked = mark_future(parsed, kafka_us, MAX_SKEW_US)
        t2 = time.perf_counter()
        mark_late(marked, windows, T0_US)
        t3 = time.perf_counter()
        spent["parse"] += t1 - t0
        spent["mark_future"] += t2 - t1
        spent["mark_late"] += t3 - t2
    return spent


def main(argv: list[str] | None = None) -> int:
    """Print µs per echo for each stage, median and fastest of the runs."""
    ap = argparse.ArgumentParser(prog="python -m bench.parse_v1", description=__doc__)
    ap.add_argument("--echoes", type=int, default=200_000, help="echoes (one read task's worth)")
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--profile", action="store_true", help="cProfile one run of the job's path")
    ap.add_argument("--write", action="store_true", help="write bench/results/parse_v1.json")
    args = ap.parse_args(argv)
    n = args.echoes
    values = encoded(n, T0_US, "bench", "v1")
    stamps = [T0_US + 1_000_000] * n
    fetches = [(values[k : k + FETCH], stamps[k : k + FETCH]) for k in range(0, n, FETCH)]
    windows = WindowSpec.from_names("10s,1m,1h")
    paths: dict[str, Callable[[Sequence[bytes | None]], Any]] = {
        "job": parse_messages,
        "json reader only": lambda v: (parse_json(v), range(len(v))),
    }
    print(f"{n} v1 echoes ({sum(map(len, values)) / n:.0f} B each, {SERIES} series), "
          f"fetches of {FETCH}; load {os.getloadavg()[0]:.2f} at start")  # fmt: skip
    load_start = os.getloadavg()[0]
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in paths}
    for _ in range(args.runs):  # alternating: each path sees the same load
        for name, parse in paths.items():
            runs[name].append(run(fetches, parse, windows))
    results: dict[str, dict[str, dict[str, float]]] = {}
    for name, name_runs in runs.items():
        for stage in name_runs[0]:
            us = [r[stage] / n * 1e6 for r in name_runs]
            results.setdefault(name, {})[stage] = {
                "median_us": round(statistics.median(us), 3),
                "fastest_us": round(min(us), 3),
            }
            print(f"{name:>17} {stage:>11}: median {statistics.median(us):6.3f} µs/echo, "
                  f"fastest {min(us):6.3f}")  # fmt: skip
    load_end = os.getloadavg()[0]
    print(f"load {load_end:.2f} at end")
    if args.write:
        payload = {
            "echoes": n,
            "runs": args.runs,
            "fetch": FETCH,
            "bytes_per_echo": round(sum(map(len, values)) / n),
            "series": SERIES,
            "load": [round(load_start, 2), round(load_end, 2)],
            "paths": results,
        }
        print(f"wrote {write_result('parse_v1', payload)}")
    if args.profile:
        prof = cProfile.Profile()
        prof.enable()
        run(fetches, parse_messages, windows)
        prof.disable()
        pstats.Stats(prof).sort_stats("tottime").print_stats(15)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
