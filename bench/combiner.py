"""The read task's combiner alone (``streaming.combine.Combiner``): echoes/s per core and where
the time goes, without Spark.

One read task's share of a 1,000,000-echo micro-batch on local[2] (500,000 v2 echoes, 12 series,
windows 10s/1m/1h, the aggregation bench's latency spread: lognormal, rare multi-second stalls,
0.1 % lost) is encoded as v2 Kafka values, parsed and marked as the source does, outside the
clock, ``FETCH_ECHOES`` echoes at a time (so the combiner combines in ``COMBINE_ROWS`` chunks and
merges them, as a read task does); then only ``Combiner.add`` and ``Combiner.finish`` are
timed. The stage split is one more run under ``cProfile``: own time per function of the
combiner and per numpy/Arrow primitive (sorts, ``reduceat``, ``ufunc.at``, dictionary encoding)
charged to the combiner's function that called it (split by the callers' time where a library
wrapper is shared: approximate), so a change shows which stage it moved.

    python -m bench.combiner [--echoes 500000] [--series 12] [--repeat 5]

``--task`` times a whole read task's work instead, stage by stage (``task_stages``): v2 values of
``bench.e2e`` (1,000 echoes a message, round robin over the Kafka partitions) as fetched by the
consume loop (``--fetch-messages`` a call), then what ``KafkaEchoReader.marked_rows`` and
``read`` do with each fetch: parse, Kafka stamps, ``mark_future``, ``mark_late``, the series cap,
the combiner, and the partials written as the Arrow stream Spark's Python worker sends the JVM.

    python -m bench.combiner --task [--echoes 500000] [--fetch-messages 500] [--parse-bytes N]
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import re
import statistics
import time
from collections import defaultdict
from typing import Any

import pyarrow as pa

from streaming.consume import PARSE_BYTES

#: One read task's echoes of a 1,000,000-echo micro-batch on local[2].
ECHOES = 500_000
SERIES = 12
#: Echoes parsed and marked at a time: 100 v2 values of 100 echoes.
FETCH_ECHOES = 10_000
WINDOWS = "10s,1m,1h"
#: The combiner's own modules: their functions are stages; whatever they call is charged to them.
OWN_MODULES = ("streaming/combine.py", "core/hdr.py", "streaming/wire.py")


def marked_batches(
    echoes: int, series: int, fetch_echoes: int = FETCH_ECHOES
) -> list[pa.RecordBatch]:
    """The source's marked rows for ``echoes`` v2 echoes: what ``Combiner.add`` receives."""
    from bench.aggregation import V2_BATCH, generate, raw_values
    from core.windows import WindowSpec
    from streaming.marks import mark_late
    from testkit.parse import parse_with_stamps

    t0 = 1_800_000_000_000_000 - 1_800_000_000_000_000 % 3_600_000_000
    values = raw_values(generate(echoes, t0, partitions=series), "v2").column("value").to_pylist()
    spec = WindowSpec.from_names(WINDOWS)
    out = []
    per_fetch = max(fetch_echoes // V2_BATCH, 1)
    for k in range(0, len(values), per_fetch):
        chunk = values[k : k + per_fetch]
        parsed = parse_with_stamps(chunk, [None] * len(chunk), 300_000_000)
        out.append(mark_late(parsed, spec, 0))
    return out


def run_combiner(batches: list[pa.RecordBatch]) -> tuple[float, float, int]:
    """Wall and CPU seconds of one task's ``Combiner`` over ``batches``, and partial rows out."""
    from core.hdr import HdrLayout
    from core.windows import WindowSpec
    from streaming.combine import Combiner

    combiner = Combiner(WindowSpec.from_names(WINDOWS), HdrLayout())
    wall, cpu = time.perf_counter(), time.process_time()
    rows = 0
    for batch in batches:
        rows += sum(b.num_rows for b in combiner.add(batch))
    rows += sum(b.num_rows for b in combiner.finish())
    return time.perf_counter() - wall, time.process_time() - cpu, rows


def _own(file: str, name: str) -> str | None:
    """``module.function`` of the combiner's own functions, None for anything else."""
    for module in OWN_MODULES:
        if file.endswith(module):
            return f"{module.split('/')[-1][:-3]}.{name}"
    return None


def _primitive(file: str, name: str) -> str:
    """A library call's short name: ``reduceat``, ``argsort``, ``take``, ``wrapper`` (Arrow)."""
    match = re.search(r"<(?:built-in )?method '?([\w.]+?)'?(?: of .*)?>$", name)
    if match:
        return match.group(1).split(".")[-1]
    return f"{name} ({file.rsplit('/', 1)[-1]})" if file != "~" else name


def stage_split(batches: list[pa.RecordBatch]) -> dict[str, float]:
    """Seconds of own time per stage from one run under ``cProfile``: each of the combiner's
    functions, and each library call charged to the combiner's function that made it."""
    profile = cProfile.Profile()
    profile.enable()
    run_combiner(batches)
    profile.disable()
    stats = pstats.Stats(profile).stats  # type: ignore[attr-defined]
    split: dict[str, float] = defaultdict(float)

    def owners(func: tuple[str, int, str], seen: frozenset[Any]) -> dict[str, float]:
        """The combiner's functions a library call was made from (through library wrappers),
        each with its share of the calls' time."""
        callers = stats[func][4] if func in stats else {}
        out: dict[str, float] = defaultdict(float)
        total = sum(c[2] for c in callers.values()) or 1.0
        for caller, c in callers.items():
            own = _own(caller[0], caller[2])
            if own is not None:
                out[own] += c[2] / total
            elif caller not in seen:
                for name, share in owners(caller, seen | {caller}).items():
                    out[name] += share * c[2] / total
            else:
                out["other"] += c[2] / total
        return out or {"other": 1.0}

    for func, (_cc, _nc, own_s, _cum, _callers) in stats.items():
        file, _line, name = func
        own = _own(file, name)
        if own is not None:
            split[own] += own_s
        elif "run_combiner" not in name and "_lsprof" not in name:
            for owner, share in owners(func, frozenset([func])).items():
                split[f"{owner} > {_primitive(file, name)}"] += own_s * share
    return dict(sorted(split.items(), key=lambda kv: -kv[1]))


#: v2 messages per ``consume`` call in ``--task``: a read task of bench.e2e's 1,000,000-echo
#: batches got its 500 messages in one call (Apache Kafka 4.1.1, one broker, measured).
FETCH_MESSAGES = 500
#: Kafka partitions of the echo topic a task reads (bench.e2e: 64 over local[2]'s 2 tasks).
TASK_PARTITIONS = 32
TASK_STAGES = ("parse", "stamps", "mark_future", "mark_late", "admit", "combine", "to_spark")


def task_values(echoes: int, series: int) -> list[bytes]:
    """One read task's v2 Kafka values, as ``bench.e2e`` produces them."""
    from bench import e2e

    saved, e2e.SERIES = e2e.SERIES, series
    try:
        t0 = 1_800_000_000_000_000 - 1_800_000_000_000_000 % 3_600_000_000
        return e2e.encoded(echoes, t0, "bench", "v2")
    finally:
        e2e.SERIES = saved


def run_task(
    values: list[bytes], fetch_messages: int, book: str, batch_id: int, parse_bytes: int
) -> tuple[dict[str, float], int]:
    """Seconds per stage of one read task over ``values`` (``KafkaEchoReader.marked_rows`` then
    ``read``, step by step, timed in CPU seconds), and the partial rows it yields."""
    import numpy as np

    clock = time.process_time  # CPU, not wall: the machine is shared, a wait is not a cost

    from core.hdr import HdrLayout
    from core.windows import WindowSpec
    from streaming import admission
    from streaming.combine import Combiner
    from streaming.consume import Fetched
    from streaming.marks import mark_future, mark_late
    from streaming.parse import parse_messages

    spec = WindowSpec.from_names(WINDOWS)
    parts = list(range(TASK_PARTITIONS))
    wm = 1_700_000_000_000_000
    plan = admission.plan(book, batch_id, wm, max(spec.resolutions_us.values()), 10_000, parts)
    cap = admission.TaskAdmission(plan, parts)
    combiner = Combiner(spec, HdrLayout())
    spent = dict.fromkeys(TASK_STAGES, 0.0)
    kafka_ms = 1_800_000_000_000 - 1_800_000_000_000 % 3_600_000
    partials = 0
    sink = pa.BufferOutputStream()
    from streaming.state_keys import PARTIAL_SCHEMA

    writer = pa.ipc.new_stream(sink, PARTIAL_SCHEMA)

    def to_spark(batches: Any) -> None:
        nonlocal partials
        t = clock()
        for b in batches:
            partials += b.num_rows
            writer.write_batch(b)
        spent["to_spark"] += clock() - t

    for k in range(0, len(values), fetch_messages):
        chunk: list[bytes | None] = list(values[k : k + fetch_messages])
        kafka_us: list[int | None] = [(kafka_ms + k + i) * 1000 for i in range(len(chunk))]
        partitions = [(k + i) % (2 * TASK_PARTITIONS) // 2 for i in range(len(chunk))]
        for got in Fetched(chunk, kafka_us, partitions).pieces(parse_bytes):  # as the source
            t0 = clock()
            parsed, index = parse_messages(got.values)
            t1 = clock()
            stamps = pa.array(got.kafka_us, pa.int64()).take(pa.array(index))
            t2 = clock()
            rows = mark_future(parsed, stamps, 300_000_000)
            t3 = clock()
            rows = mark_late(rows, spec, wm)
            t4 = clock()
            rows = cap.admit(rows, np.asarray(got.partitions)[index], wm)
            t5 = clock()
            out = list(combiner.add(rows))
            t6 = clock()
            steps = (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4, t6 - t5)
            for name, dt in zip(TASK_STAGES, steps, strict=False):
                spent[name] += dt
            to_spark(out)
    t = clock()
    out = list(combiner.finish())
    spent["combine"] += clock() - t
    to_spark(out)
    writer.close()
    return spent, partials


def task_stages(
    echoes: int, series: int, fetch_messages: int, repeat: int, parse_bytes: int = PARSE_BYTES
) -> dict[str, Any]:
    """Median µs per echo of each stage of a read task over ``repeat`` runs (after one warm-up),
    and the top functions by own time of one more run under ``cProfile``."""
    import tempfile

    values = task_values(echoes, series)
    with tempfile.TemporaryDirectory(prefix="nines-task-") as book:
        run_task(values, fetch_messages, book, 0, parse_bytes)
        runs = [run_task(values, fetch_messages, book, i + 1, parse_bytes) for i in range(repeat)]
        profile = cProfile.Profile()
        profile.enable()
        run_task(values, fetch_messages, book, repeat + 1, parse_bytes)
        profile.disable()
    per_echo = {
        s: round(statistics.median(r[0][s] for r in runs) / echoes * 1e6, 4) for s in TASK_STAGES
    }
    stats = pstats.Stats(profile).stats  # type: ignore[attr-defined]
    own = sorted(
        ((v[2], f"{f[2]} ({f[0].rsplit('/', 1)[-1]}:{f[1]})") for f, v in stats.items()),
        reverse=True,
    )
    return {
        "echoes": echoes,
        "series": series,
        "messages": len(values),
        "fetch_messages": fetch_messages,
        "parse_bytes": parse_bytes,
        "partials": runs[0][1],
        "us_per_echo": per_echo,
        "us_per_echo_total": round(sum(per_echo.values()), 4),
        "runs_total_s": [round(sum(r[0].values()), 4) for r in runs],
        "profile_top_own_s": {name: round(s, 4) for s, name in own[:25]},
        "load_avg_1m": round(os.getloadavg()[0], 2),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.combiner", description=__doc__)
    ap.add_argument("--echoes", type=int, default=ECHOES, help="echoes of one read task")
    ap.add_argument("--series", type=int, default=SERIES, help="probe partitions (series)")
    ap.add_argument(
        "--fetch",
        type=int,
        default=FETCH_ECHOES,
        help="echoes per marked batch (the aggregation bench's reader hands a task's all at once)",
    )
    ap.add_argument("--repeat", type=int, default=5, help="timed runs (the median is reported)")
    ap.add_argument("--json", action="store_true", help="one JSON line instead of a table")
    ap.add_argument("--task", action="store_true", help="a whole read task, stage by stage")
    ap.add_argument(
        "--fetch-messages", type=int, default=FETCH_MESSAGES, help="v2 messages a fetch (--task)"
    )
    ap.add_argument(
        "--parse-bytes",
        type=int,
        default=PARSE_BYTES,
        help="values parsed at a time (--task; streaming.consume.PARSE_BYTES)",
    )
    args = ap.parse_args(argv)
    if args.task:
        task = task_stages(
            args.echoes, args.series, args.fetch_messages, args.repeat, args.parse_bytes
        )
        if args.json:
            print(json.dumps(task))
            return 0
        print(
            f"{task['echoes']:,} v2 echoes in {task['messages']:,} messages, "
            f"{args.fetch_messages} a fetch parsed {args.parse_bytes:,} B at a time, "
            f"{task['partials']:,} partials; median of "
            f"{args.repeat}, µs per echo (load {task['load_avg_1m']}):"
        )
        for stage, us in task["us_per_echo"].items():
            print(f"  {us:8.4f}  {stage}")
        print(f"  {task['us_per_echo_total']:8.4f}  total")
        print("top own time under cProfile (s):")
        for name, sec in task["profile_top_own_s"].items():
            print(f"  {sec:8.4f}  {name}")
        return 0
    batches = marked_batches(args.echoes, args.series, args.fetch)
    echoes = sum(b.num_rows for b in batches)
    run_combiner(batches)  # warm: imports, allocator
    runs = [run_combiner(batches) for _ in range(args.repeat)]
    wall_s = statistics.median(r[0] for r in runs)
    cpu_s = statistics.median(r[1] for r in runs)
    split = stage_split(batches)
    result: dict[str, Any] = {
        "echoes": echoes,
        "series": args.series,
        "windows": WINDOWS,
        "partials": runs[0][2],
        "wall_s": round(wall_s, 4),
        "cpu_s": round(cpu_s, 4),
        "echoes_per_cpu_s": round(echoes / cpu_s),
        "us_per_echo": round(cpu_s / echoes * 1e6, 3),
        "runs_wall_s": [round(r[0], 4) for r in runs],
        "stage_split_s": {k: round(v, 4) for k, v in split.items() if v >= 0.0005},
        "profiled_total_s": round(sum(split.values()), 4),
        "load_avg_1m": round(os.getloadavg()[0], 2),
    }
    if args.json:
        print(json.dumps(result))
        return 0
    print(
        f"{echoes:,} echoes, {args.series} series, windows {WINDOWS}: {result['partials']:,} "
        f"partials; median of {args.repeat}: {wall_s:.3f} s wall, {cpu_s:.3f} s CPU = "
        f"{result['echoes_per_cpu_s']:,} echoes/s per core ({result['us_per_echo']} µs/echo); "
        f"load {result['load_avg_1m']}"
    )
    total = result["profiled_total_s"]
    print(f"stage split (own time under cProfile, {total:.3f} s in all):")
    for stage, seconds in result["stage_split_s"].items():
        print(f"  {seconds:8.4f} s  {seconds / total:6.1%}  {stage}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
