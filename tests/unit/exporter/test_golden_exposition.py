"""The exporter's and the probe's /metrics bodies, byte for byte, against bodies recorded once.

The files under ``tests/data/golden/`` were written from main before the exporter was split into
collectors and a renderer (issue 34) and must never be regenerated to make this test pass: a
difference is a change of what Prometheus scrapes. A new family is the one change made to them
since, each spliced in as its own bytes alone, every other byte checked equal (issue 41:
``nines_offsets_reset_total``, empty here). The input is fixed (seeded values, a fake
clock, fixed timestamps) and walks every family: windows of three resolutions with topic and
broker rollups, derived and job counters, health, a scrape gap, the series cap and the TTL.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from prometheus_client import CollectorRegistry, generate_latest

from core import promproto
from core.hdr import HdrLayout, SparseHistogram
from core.windows import SeriesKey, WindowHistogram, with_rollups
from monitor.exporter import ExporterConfig, LatencyExporter
from probes.metrics import ProbeCollector
from streaming.counters import StreamCounters
from testkit.exporter import protobuf_body, text_body

GOLDEN = Path(__file__).resolve().parents[2] / "data" / "golden"
LAYOUT = HdrLayout()
SPANS_S = {"10s": 10, "1m": 60, "1h": 3600}


class Clock:
    """A monotonic clock the test moves."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def cells(
    rng: np.random.Generator, t_s: int, partitions: int, scale_us: int
) -> list[WindowHistogram]:
    """Cells (partition × leader) of every resolution whose window holds ``t_s``."""
    out = []
    for res, span in SPANS_S.items():
        start = t_s // span * span
        for p in range(partitions):
            for kind in ("e2e", "publish"):
                values = rng.integers(scale_us, scale_us * 40, 30 + 45 * p)
                series = SeriesKey("c1", "t1", str(p), kind, str(1 + p % 2))
                hist = SparseHistogram.from_values(LAYOUT, values)
                out.append(
                    WindowHistogram(res, start * 10**6, (start + span) * 10**6, series, hist, p)
                )
    hiccup = SeriesKey("c1", "t1", "all", "hiccup")
    hist = SparseHistogram.from_values(LAYOUT, rng.integers(50, 90_000, 12))
    out.append(
        WindowHistogram("10s", t_s // 10 * 10 * 10**6, (t_s // 10 * 10 + 10) * 10**6, hiccup, hist)
    )
    return with_rollups(out)


def job_counters() -> StreamCounters:
    """A batch's counters of every kind the job hands over."""
    return StreamCounters(
        echoes={("c1", "t1", "0"): 75, ("c1", "t1", "1"): 120},
        lost={("c1", "t1", "1"): 2},
        late={("c1", "t1", "0"): 3},
        overflow={SeriesKey("c1", "t1", "0", "e2e"): 1},
        bad={"json": 4, "range": 1},
        data_loss={("c1", "echoes"): 7},
        systems={("c1", "kafka"): 195},
    )


def exporter_bodies(config: ExporterConfig) -> dict[str, bytes]:
    """The text and protobuf bodies after a first batch, and after three more with a gap."""
    rng = np.random.default_rng(34)
    clock = Clock()
    exp = LatencyExporter(config, clock=clock)
    bodies: dict[str, bytes] = {}
    exp.update(cells(rng, 5, 3, 1_000))
    exp.scraped("10.0.0.1:9090")
    bodies["first.txt"] = text_body(exp)
    bodies["first.pb"] = protobuf_body(exp)
    clock.now += 15
    exp.update(cells(rng, 15, 3, 2_000), job_counters())
    exp.set_pipeline_health(1.25, 5000.0, 12.5, 321, last_batch_ts=1_800_000_000.5)
    clock.now += 300
    exp.scraped("10.0.0.1:9090")  # later than peak_hold: a gap
    exp.update(cells(rng, 25, 2, 500))  # partition 2 closes no more windows
    clock.now += 10
    exp.update(cells(rng, 95, 2, 800), job_counters())  # ... and leaves by the TTL
    exp.set_pipeline_health(0.75, 4000.0, 11.0, 300, last_batch_ts=1_800_000_090.25)
    bodies["last.txt"] = text_body(exp)
    bodies["last.pb"] = protobuf_body(exp)
    return bodies


def probe_bodies() -> dict[str, bytes]:
    """The probe's registry rendered as its /metrics does, from a fixed snapshot."""
    stats = {
        "sent": 100, "acked": 99, "received": 97, "lost": 1, "late_after_loss": 0,
        "duplicates": 2, "out_of_order": 1, "send_errors": {"timeout": 1},
    }  # fmt: skip
    snapshot = {
        "cluster": "c1",
        "topic": "t1",
        "partitions": {0: stats, 1: {**stats, "sent": 50, "send_errors": {}}},
        "leaders": {0: 1},
        "in_flight": 3,
        "echo_dropped": 0,
        "arrivals_dropped": 1,
        "echo_buffered": 12,
        "hiccup_max_us": 1500,
        "brokers": 3,
        "brokers_unprobed": 1,
        "admin_errors": {("create", "TOPIC_ALREADY_EXISTS"): 1},
    }
    registry = CollectorRegistry(auto_describe=False)
    registry.register(ProbeCollector(lambda: snapshot))
    return {
        "probe.txt": generate_latest(registry),
        "probe.pb": promproto.encode_families(registry.collect()),
    }


def all_bodies() -> dict[str, bytes]:
    """Every golden body by file name."""
    out = {f"default.{k}": v for k, v in exporter_bodies(ExporterConfig()).items()}
    capped = ExporterConfig(
        max_series=5, series_ttl_windows=2, partition_histograms=True, native_max_buckets=6
    )
    out.update({f"capped.{k}": v for k, v in exporter_bodies(capped).items()})
    out.update(probe_bodies())
    return out


BODIES = all_bodies()


@pytest.mark.parametrize("name", sorted(BODIES))
def test_body_is_byte_for_byte_the_recorded_one(name: str) -> None:
    assert BODIES[name] == (GOLDEN / name).read_bytes(), name


if __name__ == "__main__":  # written once, from main before issue 34's split: never again
    GOLDEN.mkdir(parents=True, exist_ok=True)
    for name, body in BODIES.items():
        (GOLDEN / name).write_bytes(body)
