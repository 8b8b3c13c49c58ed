"""The exporter at its series cap: memory, update time, scrape size (python -m bench.cardinality).

Fills a ``LatencyExporter`` with ``max_series`` (cluster, topic, partition) series, three kinds
each, at three resolutions, as a full stream job would, then renders /metrics once.
"""

from __future__ import annotations

import argparse
import gzip
import random
import time
import tracemalloc

from core.hdr import HdrLayout, SparseHistogram
from core.windows import SeriesKey, WindowHistogram, with_topic_rollups
from monitor.exporter import LatencyExporter
from monitor.exporter.state import DEFAULT_MAX_SERIES

RESOLUTIONS = (("10s", 10), ("1m", 60), ("1h", 3600))
KINDS = ("e2e", "publish", "send_lag")


def measure(series: int, topics: int = 20) -> dict[str, float]:
    """Fill an exporter to ``series`` and scrape it once."""
    rng = random.Random(1)
    layout = HdrLayout()
    shapes = [
        SparseHistogram.from_values(layout, [rng.randint(3_000, 90_000) for _ in range(1_000)])
        for _ in range(topics)
    ]
    tracemalloc.start()
    exporter = LatencyExporter(finest_resolution="10s", max_series=series)
    started = time.perf_counter()
    for res, span_s in RESOLUTIONS:
        windows = [
            WindowHistogram(
                res, 0, span_s * 1_000_000, SeriesKey("c", f"t{p % topics}", str(p), kind),
                shapes[p % topics],
            )
            for p in range(series - topics)  # the topics' merged series take the rest
            for kind in KINDS
        ]  # fmt: skip
        exporter.update(with_topic_rollups(windows))
    update_s = time.perf_counter() - started
    memory = tracemalloc.get_traced_memory()[0]
    started = time.perf_counter()
    body = exporter.exposition()
    scrape_s = time.perf_counter() - started
    return {
        "series": float(series),
        "windows": float(len(exporter.latest_windows()["10s"]) * len(RESOLUTIONS)),
        "rejected": float(exporter.series_rejected),
        "memory_mib": memory / 2**20,
        "update_s": update_s,
        "scrape_s": scrape_s,
        "scrape_mb": len(body) / 1e6,
        "scrape_gzip_mb": len(gzip.compress(body, compresslevel=1)) / 1e6,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--series", type=int, default=DEFAULT_MAX_SERIES)
    for name, value in measure(parser.parse_args().series).items():
        print(f"{name}: {value:.2f}")


if __name__ == "__main__":
    main()
