"""The exporter at a series count: memory, update and scrape cost (python -m bench.cardinality).

Fills a ``LatencyExporter`` with ``--series`` (cluster, topic, partition) probe partitions, three
kinds each, at three resolutions, as a full stream job would (plus the topics' merged series),
then scrapes /metrics over HTTP as Prometheus does (``Accept-Encoding: gzip``), in the text
format and in the protobuf format (what a Prometheus with native histograms on asks for, for
every family). Every series gets its own latency distribution, so the gzip ratio is not
flattered by repeated values. CPU is ``time.process_time()`` (server and client threads of this
process), so a loaded machine's other work is not counted. Bytes are what the client received:
gzip, as the server compressed it (by parts, ``core.gzip_parts``), for both formats alike.

A scrape follows a batch of 10 s windows (the median of ``--scrapes``), then the 10 s and 1 m
windows (every scrape at Prometheus' default 1m interval), then every resolution's (once an
hour). The windows' updates before each are measured apart (``update_*_cpu_s``): the exporter
encodes the finest resolution's windows in the scrape, and a coarser one's (1 m, 1 h) in a
background worker when they close, which encodes and deflates their chunks for the formats
scraped before: its CPU is counted in the update (the bench waits for it; ``prerender_*_cpu_s``
is its share), and ``*_total_cpu_s`` is the update and the scrape together, what the process
spends per scrape interval of that kind beyond the other 10 s batches of the interval. Memory
(tracemalloc, on an exporter of its own) is what the filled exporter holds, and
``memory_served_mib`` once it has served both formats (each keeps its encoded label prefixes,
and its body's parts for the next scrape).
"""

from __future__ import annotations

import argparse
import gzip
import time
import tracemalloc
import urllib.request
from typing import Any

import numpy as np

from bench.machine import write_result
from core import promproto
from core.hdr import HdrLayout, SparseHistogram
from core.windows import SeriesKey, WindowHistogram, with_topic_rollups
from monitor.exporter import ExporterConfig, LatencyExporter
from runtime.webserver import GZIP_LEVEL, PROTOBUF_GZIP_LEVEL
from testkit.exporter import prerender_cpu_s, protobuf_body, text_body, wait_prerendered
from testkit.promproto_decode import read_varint

RESOLUTIONS = (("10s", 10), ("1m", 60), ("1h", 3600))
KINDS = ("e2e", "publish", "send_lag")
#: Probe messages per second and partition: a 10 s window holds 1,000 samples (quantiles up to
#: p99.9 are exported), a 1 m window 6,000, a 1 h window 360,000 (up to p99.999).
RATE_PER_S = 100
#: Raw values drawn per window; the counts are scaled up to the window's sample count.
DRAWN = 1_000
SCRAPES = 5


def _windows(
    series: int, topics: int, res: str, span_s: int, rate_per_s: int, seed: int
) -> list[WindowHistogram]:
    """One closed window per partition and kind, each with its own lognormal latencies."""
    rng = np.random.default_rng(seed)
    layout = HdrLayout()
    scale = max(1, rate_per_s * span_s // DRAWN)
    out = []
    for p in range(series):
        for kind in KINDS:
            median_us = rng.uniform(2_000, 20_000)
            drawn_n = int(rng.poisson(DRAWN))  # sample counts vary from window to window
            values = rng.lognormal(np.log(median_us), rng.uniform(0.3, 1.2), drawn_n)
            drawn = SparseHistogram.from_values(layout, np.minimum(values, 3.6e9).astype(np.int64))
            hist = SparseHistogram(
                layout, drawn.index, drawn.count * scale, drawn.max_us, drawn.sum_us * scale
            )
            key = SeriesKey("c", f"t{p % topics}", str(p), kind)
            lost = int(rng.poisson(0.5))
            out.append(WindowHistogram(res, 0, span_s * 1_000_000, key, hist, lost=lost))
    return out


#: What Prometheus 2.42 with native histograms on sends.
PROTOBUF_ACCEPT = (
    "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited,"
    "text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
)


def _scrape(port: int, accept_gzip: bool, protobuf: bool = False) -> tuple[float, float, int]:
    """One GET /metrics: seconds until the last byte, CPU seconds (server and client), bytes."""
    headers = {"Accept-Encoding": "gzip"} if accept_gzip else {}
    if protobuf:
        headers["Accept"] = PROTOBUF_ACCEPT
    request = urllib.request.Request(f"http://127.0.0.1:{port}/metrics", headers=headers)
    started, cpu = time.perf_counter(), time.process_time()
    with urllib.request.urlopen(request, timeout=120) as response:
        data = response.read()
        if protobuf:
            assert response.headers["Content-Type"] == promproto.CONTENT_TYPE
    return time.perf_counter() - started, time.process_time() - cpu, len(data)


def _median(values: list[float]) -> float:
    return sorted(values)[len(values) // 2]


def measure(
    series: int,
    topics: int = 20,
    partition_histograms: bool = False,
    scrapes: int = SCRAPES,
    rate_per_s: int = RATE_PER_S,
) -> dict[str, Any]:
    """Fill an exporter with ``series`` probe partitions and scrape it ``scrapes`` times."""
    batches = [
        with_topic_rollups(_windows(series, topics, res, span_s, rate_per_s, seed))
        for seed, (res, span_s) in enumerate(RESOLUTIONS)
    ]
    config = ExporterConfig(max_series=series + topics, partition_histograms=partition_histograms)
    # memory on an exporter of its own: tracemalloc slows what it traces several times over
    tracemalloc.start()
    traced = LatencyExporter(config)
    for batch in batches:
        traced.update(batch)
    memory = tracemalloc.get_traced_memory()[0]
    traced.exposition_parts("text")  # what the server keeps: the bodies' parts
    traced.exposition_parts("protobuf")
    memory_served = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    del traced
    exporter = LatencyExporter(config)
    started = time.perf_counter()
    for batch in batches:
        exporter.update(batch)
    update_s = time.perf_counter() - started
    started, cpu = time.perf_counter(), time.process_time()
    body = text_body(exporter)
    render_s, render_cpu_s = time.perf_counter() - started, time.process_time() - cpu
    cpu = time.process_time()
    body_pb = protobuf_body(exporter)
    render_pb_cpu_s = time.process_time() - cpu
    server = exporter.serve(port=0)
    gzip_runs, plain_runs, pb_runs = [], [], []
    updates: dict[str, list[float]] = {"10s": [], "minute": [], "all": []}
    prerenders: dict[str, list[float]] = {"10s": [], "minute": [], "all": []}

    def update(case: str, *closed: list[WindowHistogram]) -> None:
        cpu, worker = time.process_time(), prerender_cpu_s(exporter)
        for batch in closed:
            exporter.update(batch)
        # the background pre-render of the coarse resolutions is the update's work: waited for
        # and counted here (process CPU: every thread), never in the next scrape's
        assert wait_prerendered(exporter, 120.0), "the pre-render did not finish"
        updates[case].append(time.process_time() - cpu)
        prerenders[case].append(prerender_cpu_s(exporter) - worker)

    try:
        for _ in range(scrapes):
            # each scrape follows a batch of 10 s windows, as a live job's do: encoding that
            # resolution's windows is in the scrape, the update is measured apart
            update("10s", batches[0])
            gzip_runs.append(_scrape(server.port, True))
            update("10s", batches[0])
            plain_runs.append(_scrape(server.port, False))
            update("10s", batches[0])
            pb_runs.append(_scrape(server.port, True, protobuf=True))
        # at Prometheus' default 1m interval a scrape follows a minute's windows too
        minute = []
        for protobuf in (False, True):
            update("minute", batches[0], batches[1])
            minute.append(_scrape(server.port, True, protobuf=protobuf))
        # the costliest scrape: right after every resolution's windows closed (once an hour)
        update("all", *batches)
        all_text = _scrape(server.port, True)
        update("all", *batches)
        all_pb = _scrape(server.port, True, protobuf=True)
    finally:
        server.close()
    update_10s, update_minute, update_all = (_median(updates[c]) for c in ("10s", "minute", "all"))
    return {
        "series": series,
        "topics": topics,
        "partition_histograms": partition_histograms,
        "kind_series": len({w.series for w in batches[0]}),
        "windows": sum(len(b) for b in batches),
        "rate_per_s": rate_per_s,
        "rejected": exporter.collectors.series.rejected,
        "memory_mib": memory / 2**20,
        "memory_served_mib": memory_served / 2**20,
        "update_s": update_s,
        "render_s": render_s,
        "render_cpu_s": render_cpu_s,
        "body_mb": len(body) / 1e6,
        "body_gzip_mb": len(gzip.compress(body, compresslevel=GZIP_LEVEL)) / 1e6,
        "bytes_per_kind_series": len(body) / len({w.series for w in batches[0]}),
        "scrape_gzip_s": _median([t for t, _, _ in gzip_runs]),
        "scrape_gzip_cpu_s": _median([c for _, c, _ in gzip_runs]),
        "scrape_gzip_mb": gzip_runs[-1][2] / 1e6,
        "scrape_plain_s": _median([t for t, _, _ in plain_runs]),
        "scrape_plain_cpu_s": _median([c for _, c, _ in plain_runs]),
        "scrape_plain_mb": plain_runs[-1][2] / 1e6,
        "render_pb_cpu_s": render_pb_cpu_s,
        "body_pb_mb": len(body_pb) / 1e6,
        "scrape_pb_gzip_s": _median([t for t, _, _ in pb_runs]),
        "scrape_pb_gzip_cpu_s": _median([c for _, c, _ in pb_runs]),
        "scrape_pb_gzip_mb": pb_runs[-1][2] / 1e6,
        "scrape_minute_cpu_s": minute[0][1],
        "scrape_pb_minute_cpu_s": minute[1][1],
        "scrape_all_changed_cpu_s": all_text[1],
        "scrape_pb_all_changed_cpu_s": all_pb[1],
        "scrape_minute_mb": minute[0][2] / 1e6,
        "scrape_pb_minute_mb": minute[1][2] / 1e6,
        "scrape_all_changed_mb": all_text[2] / 1e6,
        "scrape_pb_all_changed_mb": all_pb[2] / 1e6,
        "update_10s_cpu_s": update_10s,
        "update_minute_cpu_s": update_minute,
        "update_all_cpu_s": update_all,
        "prerender_minute_cpu_s": _median(prerenders["minute"]),
        "prerender_all_cpu_s": _median(prerenders["all"]),
        "gzip_total_cpu_s": update_10s + _median([c for _, c, _ in gzip_runs]),
        "pb_total_cpu_s": update_10s + _median([c for _, c, _ in pb_runs]),
        "minute_total_cpu_s": update_minute + minute[0][1],
        "pb_minute_total_cpu_s": update_minute + minute[1][1],
        "all_changed_total_cpu_s": update_all + all_text[1],
        "pb_all_changed_total_cpu_s": update_all + all_pb[1],
        "scrapes": scrapes,
        "gzip_levels": _gzip_levels(body),
        "families": _family_bytes(body),
        "families_pb": _family_bytes_pb(body_pb),
    }


def _gzip_levels(body: bytes) -> dict[str, dict[str, float]]:
    """Bytes and CPU seconds of gzipping the body at the levels worth considering."""
    out = {}
    for level in (1, 3, 4, 6):
        cpu = time.process_time()
        size = len(gzip.compress(body, compresslevel=level))
        out[str(level)] = {"mb": size / 1e6, "cpu_s": time.process_time() - cpu}
    return out


def _family_bytes(body: bytes) -> dict[str, int]:
    """Bytes of each metric family's sample lines (where a scrape's bytes go)."""
    out: dict[str, int] = {}
    for line in body.decode().splitlines(keepends=True):
        if not line.startswith("#"):
            name = line.split("{", 1)[0].split(" ", 1)[0]
            out[name] = out.get(name, 0) + len(line)
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def _family_bytes_pb(body: bytes) -> dict[str, dict[str, int]]:
    """Bytes of each delimited MetricFamily: raw, and gzipped alone at the server's protobuf
    level."""
    out: dict[str, dict[str, int]] = {}
    pos = 0
    while pos < len(body):
        size, start = read_varint(body, pos)
        message = body[start : start + size]
        name_size, name_at = read_varint(message, 1)  # field 1 (the name) comes first
        name = message[name_at : name_at + name_size].decode()
        packed = gzip.compress(message, compresslevel=PROTOBUF_GZIP_LEVEL)
        out[name] = {"raw": size, "gzip": len(packed)}
        pos = start + size
    return dict(sorted(out.items(), key=lambda kv: -kv[1]["gzip"]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--series", type=int, default=10_000, help="probe partitions")
    parser.add_argument("--topics", type=int, default=20)
    parser.add_argument("--partition-histograms", action="store_true")
    parser.add_argument("--scrapes", type=int, default=SCRAPES)
    parser.add_argument("--rate", type=int, default=RATE_PER_S, help="msgs/s per partition")
    parser.add_argument("--save", action="store_true", help="write bench/results/cardinality.json")
    args = parser.parse_args()
    result = measure(args.series, args.topics, args.partition_histograms, args.scrapes, args.rate)
    for name, value in result.items():
        if name == "families":
            for family, size in value.items():
                print(f"  {family}: {size / 1e6:.2f} MB")
        elif name == "families_pb":
            for family, size in value.items():
                print(f"  pb {family}: {size['raw'] / 1e6:.2f} MB, gzip {size['gzip'] / 1e6:.3f}")
        elif name == "gzip_levels":
            for level, cost in value.items():
                print(f"  gzip level {level}: {cost['mb']:.2f} MB in {cost['cpu_s']:.3f} s CPU")
        else:
            print(f"{name}: {value:.3f}" if isinstance(value, float) else f"{name}: {value}")
    if args.save:
        write_result("cardinality", {"command": "python -m bench.cardinality --save", **result})


if __name__ == "__main__":
    main()
