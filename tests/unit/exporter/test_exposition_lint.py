"""Prometheus' own linter accepts both /metrics endpoints: the stream exporter's and the probe's.

``promtool check metrics`` reads each body as a live server serves it (every family the
endpoint can export is present: broker rollups, health, hiccups, errors).
"""

from __future__ import annotations

import urllib.request

from exposition_lint import promtool_findings

from core.hdr import HdrLayout, SparseHistogram
from core.windows import SeriesKey, WindowHistogram, with_rollups
from monitor.exporter import LatencyExporter
from probes.metrics import serve

LAYOUT = HdrLayout()


def _get(port: int) -> bytes:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        return bytes(r.read())


def _cell(partition: str, broker: str, kind: str, values: list[int]) -> WindowHistogram:
    return WindowHistogram(
        "10s",
        0,
        10_000_000,
        SeriesKey("c", "t", partition, kind, broker),
        SparseHistogram.from_values(LAYOUT, values),
        1 if kind == "e2e" else 0,
    )


def test_the_stream_exporters_metrics_pass_promtool() -> None:
    exp = LatencyExporter()
    exp.update(
        with_rollups(
            [
                _cell(p, b, kind, [1_000 + i for i in range(2_000)])
                for p, b in (("0", "1"), ("1", "2"))
                for kind in ("e2e", "publish")
            ]
        )
    )
    exp.set_pipeline_health(0.5, 1000.0, 3.0, 42, 1_800_000_000.0)
    server = exp.serve("127.0.0.1", 0)
    try:
        body = _get(server.port)
    finally:
        server.close()
    for family in ("nines_latency_seconds", "nines_broker_latency_peak_quantile_seconds"):
        assert f"# TYPE {family} gauge".encode() in body
    assert promtool_findings(body) == []


def test_the_probes_metrics_pass_promtool() -> None:
    stats = {
        "sent": 10,
        "acked": 9,
        "received": 8,
        "lost": 1,
        "late_after_loss": 0,
        "duplicates": 0,
        "out_of_order": 0,
        "send_errors": {"timeout": 1},
    }
    snapshot = {
        "cluster": "c",
        "topic": "t",
        "partitions": {0: stats, 1: stats},
        "leaders": {0: 1, 1: 2},
        "in_flight": 2,
        "echo_dropped": 0,
        "arrivals_dropped": 0,
        "echo_buffered": 3,
        "hiccup_max_us": 1_500,
        "brokers": 2,
        "brokers_unprobed": 0,
        "partitions_unprobed": 1,
        "topic_exists": 1,
        "metadata_age_s": 1.5,
        "admin_errors": {("create_topic", "TOPIC_AUTHORIZATION_FAILED"): 1},
    }
    server = serve(lambda: snapshot, "127.0.0.1", 0)
    try:
        body = _get(server.port)
    finally:
        server.close()
    assert b"nines_probe_send_errors_total{" in body
    assert promtool_findings(body) == []
