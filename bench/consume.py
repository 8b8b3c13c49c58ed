"""A read task's Kafka consume alone (``streaming.consume``): wall and CPU seconds, without Spark.

A fresh one-broker Apache Kafka (``nines broker --engine kafka``) gets ``ECHOES`` seeded echoes
(v2 batches, or v1 records with ``--echo-format v1``; bench.e2e's encoding, lz4, round-robin
over ``PARTITIONS`` partitions), a backlog. Then, as a read task of a micro-batch does, a fresh
consumer (``open_consumer``, the shipped settings, or with ``--variant`` overrides) reads half
of the partitions through ``consume_ranges``:

* **slice**: ``--take`` messages of each (one micro-batch of a deeper backlog: a fetch brings up
  to ``max.partition.fetch.bytes`` of a partition, so what lies past the range's end is fetched
  and decompressed for nothing);
* **whole**: every message of each (the backlog in one batch).

Each case alternates the variants, ``--repeat`` times over both halves; medians are printed
and written to ``bench/results/consume.json``.

    python -m bench.consume [--echoes 6500000] [--take 16] [--repeat 4] [--echo-format v2] \
        [--variant max.partition.fetch.bytes=10485760,queued.max.messages.kbytes=65536]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

ECHOES = 6_500_000
PARTITIONS = 64
TAKE = 16
RESULTS = Path(__file__).parent / "results" / "consume.json"


def read_half(
    bootstrap: str,
    topic: str,
    marks: dict[str, tuple[int, int]],
    half: int,
    take: int,
    overrides: dict[str, str],
) -> tuple[int, float, float]:
    """Messages read, wall and CPU seconds of one read task over half of the partitions."""
    from streaming.consume import consume_ranges, open_consumer
    from streaming.gaps import KafkaRange

    ranges = [
        KafkaRange(int(p), low, min(high, low + take) if take else high)
        for p, (low, high) in marks.items()
        if int(p) % 2 == half
    ]
    wall0, cpu0 = time.perf_counter(), time.process_time()
    c = open_consumer(bootstrap, overrides)
    n = 0
    try:
        for fetched in consume_ranges(c, topic, ranges, 30.0):
            n += len(getattr(fetched, "values", ()))
    finally:
        c.close()
    return n, time.perf_counter() - wall0, time.process_time() - cpu0


def run(
    echoes: int, take: int, repeat: int, variants: list[dict[str, str]], echo_format: str = "v2"
) -> dict[str, Any]:
    """Both cases for every variant (the first: the shipped settings), medians."""
    from bench.e2e import encoded, produce
    from bench.machine import machine_facts
    from streaming.consume import open_consumer, watermarks
    from testbroker import EmbeddedBroker

    t0 = (int(time.time()) - 3600) * 1_000_000
    values = encoded(echoes, t0, "bench", echo_format)
    out: dict[str, Any] = {
        "machine": machine_facts(),
        "echoes": echoes,
        "echo_format": echo_format,
        "messages": len(values),
        "bytes": sum(map(len, values)),
        "partitions": PARTITIONS,
        "cases": [],
    }
    with EmbeddedBroker(engine="kafka", brokers=1, topics=[("echoes", PARTITIONS)]) as broker:
        produce(broker.bootstrap, "echoes", values, PARTITIONS)
        c = open_consumer(broker.bootstrap, {})
        marks = watermarks(c, "echoes")
        c.close()
        for case, n_take in (("slice", take), ("whole", 0)):
            samples: list[list[tuple[int, float, float]]] = [[] for _ in variants]
            for _ in range(repeat):
                for i, overrides in enumerate(variants):
                    for half in (0, 1):
                        samples[i].append(
                            read_half(broker.bootstrap, "echoes", marks, half, n_take, overrides)
                        )
            for overrides, got in zip(variants, samples, strict=True):
                row = {
                    "case": case,
                    "settings": overrides or "shipped",
                    "messages_per_task": got[0][0],
                    "wall_s": round(statistics.median(g[1] for g in got), 3),
                    "cpu_s": round(statistics.median(g[2] for g in got), 3),
                    "runs": len(got),
                }
                out["cases"].append(row)
                print(json.dumps(row))
    out["load_avg_1m_end"] = machine_facts()["load_avg_1m"]
    return out


def main(argv: list[str] | None = None) -> int:
    """Run, print, save."""
    ap = argparse.ArgumentParser(prog="python -m bench.consume", description=__doc__.split("\n")[0])
    ap.add_argument("--echoes", type=int, default=ECHOES)
    ap.add_argument("--take", type=int, default=TAKE, help="messages per partition in a slice")
    ap.add_argument("--repeat", type=int, default=4)
    ap.add_argument("--echo-format", choices=("v1", "v2"), default="v2")
    ap.add_argument(
        "--variant",
        action="append",
        default=[],
        help="KEY=VALUE[,KEY=VALUE]: consumer overrides to compare with the shipped settings",
    )
    args = ap.parse_args(argv)
    variants: list[dict[str, str]] = [{}]
    for v in args.variant:
        variants.append(dict(kv.split("=", 1) for kv in v.split(",")))
    result = run(args.echoes, args.take, args.repeat, variants, args.echo_format)
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
