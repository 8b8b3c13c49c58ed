"""What librdkafka's statistics cost the probe, by ``statistics.interval.ms``: the Python
callback (it keeps the document), the parse a scrape does, and librdkafka's ``rdk:main``
threads, which build the JSON.

A probe in this process (``ProbeAgent``, 300 msgs/s on each of the mock's 3 partitions: 900
msgs/s) runs for ``SECONDS`` per setting, off (no statistics) first; each client's ``stats_cb``
is timed with ``time.thread_time()``, and the ``rdk:main`` threads' CPU is read from
``/proc/self/task/*/stat``. Prints one line per setting: run it with
``pytest tests/bench/test_client_stats_cost.py -m bench -s`` (about 2 minutes; not in
``bench.run``'s list). docs/metrics.md quotes the figures.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import probes.kafka
from probes import ProbeAgent, ProbeConfig
from probes.client_stats import ClientStats
from testbroker import EmbeddedBroker

pytestmark = pytest.mark.bench

SECONDS = float(os.environ.get("NINES_STATS_BENCH_S", "20"))
RATE = 300  # per partition
TICKS = os.sysconf("SC_CLK_TCK")


def thread_cpu_s(prefix: str) -> float:
    """CPU seconds of this process's threads whose name starts with ``prefix``."""
    total = 0
    for task in Path("/proc/self/task").iterdir():
        try:
            stat = (task / "stat").read_text()
        except OSError:
            continue
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        if name.startswith(prefix):
            fields = stat[stat.rindex(")") + 2 :].split()
            total += int(fields[11]) + int(fields[12])
    return total / TICKS


class TimedStats(ClientStats):
    """``ClientStats`` whose callbacks add their own thread CPU to ``spent_s``."""

    def __init__(self, interval_ms: int) -> None:
        super().__init__(interval_ms)
        self.spent_s = 0.0
        self.documents = 0
        self.doc_bytes = 0

    def callback(self, client: str) -> Callable[[str], None]:
        inner = super().callback(client)

        def timed(document: str) -> None:
            t = time.thread_time()
            inner(document)
            self.spent_s += time.thread_time() - t
            self.documents += 1
            self.doc_bytes += len(document)

        return timed


def run(bootstrap: str, interval_ms: int, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    stats = TimedStats(interval_ms)
    if interval_ms:
        monkeypatch.setattr(probes.kafka, "CLIENT_STATS", stats)
    else:
        monkeypatch.setattr(probes.kafka, "watched", lambda clients: clients)
    cfg = ProbeConfig(bootstrap=bootstrap, rate=RATE, metrics_port=0, probe_id=f"st{interval_ms}")
    agent = ProbeAgent(cfg).start()
    try:
        time.sleep(3)  # start-up and first metadata out of the window
        rdk0, cpu0, wall0 = thread_cpu_s("rdk:main"), time.process_time(), time.monotonic()
        spent0, docs0 = stats.spent_s, stats.documents
        time.sleep(SECONDS)
        wall = time.monotonic() - wall0
        t = time.thread_time()
        stats.totals()  # what a scrape parses: each handle's latest document
        scrape_ms = 1000 * (time.thread_time() - t)
        out = {
            "interval_ms": interval_ms,
            "callback_pct": 100 * (stats.spent_s - spent0) / wall,
            "documents": stats.documents - docs0,
            "doc_kib": stats.doc_bytes / max(stats.documents, 1) / 1024,
            "per_document_ms": 1000 * (stats.spent_s - spent0) / max(stats.documents - docs0, 1),
            "scrape_parse_ms": scrape_ms,
            "rdk_main_pct": 100 * (thread_cpu_s("rdk:main") - rdk0) / wall,
            "process_pct": 100 * (time.process_time() - cpu0) / wall,
        }
    finally:
        agent.stop()
        monkeypatch.undo()
    return out


def test_statistics_callback_cost(monkeypatch: pytest.MonkeyPatch) -> None:
    with EmbeddedBroker() as broker:
        rows = [run(broker.bootstrap, ms, monkeypatch) for ms in (0, 1000, 5000, 1000, 0)]
    load = Path("/proc/loadavg").read_text().split()[:3]
    for r in rows:
        print(
            f"statistics.interval.ms={r['interval_ms']}: callback {r['callback_pct']:.3f} % of "
            f"a core ({r['documents']} documents of {r['doc_kib']:.1f} KiB, "
            f"{r['per_document_ms']:.4f} ms each), "
            f"parse at a scrape {r['scrape_parse_ms']:.2f} ms, "
            f"rdk:main {r['rdk_main_pct']:.2f} %, "
            f"process {r['process_pct']:.1f} %; load {' '.join(load)}"
        )
    on = [r for r in rows if r["interval_ms"] == 1000]
    assert all(r["documents"] > 0 for r in on)
    assert all(r["callback_pct"] < 1.0 for r in on), on
