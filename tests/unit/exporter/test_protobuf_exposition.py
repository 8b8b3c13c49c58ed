"""The protobuf exposition: the same samples as the text format, served to whoever asks for it.

Decoded by ``testkit/promproto_decode.py`` (written from metrics.proto, independent of the
encoder); tests/e2e/test_native_histograms_e2e.py has a real Prometheus read both endpoints.
"""

from __future__ import annotations

import gzip
import urllib.request

import numpy as np
import pytest
from prometheus_client.parser import text_string_to_metric_families

from core import promproto
from core.hdr import HdrLayout, SparseHistogram
from core.windows import SeriesKey, WindowHistogram, with_rollups
from monitor.exporter import LatencyExporter
from monitor.exporter.contract import NATIVE
from monitor.exporter.native import rebin
from monitor.exporter.render import PROTOBUF
from probes.metrics import serve
from testkit.exporter import protobuf_body, text_body
from testkit.promproto_decode import families, native_buckets, samples

LAYOUT = HdrLayout()
PROMETHEUS_ACCEPT = (
    "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited,"
    "application/openmetrics-text;version=1.0.0;q=0.8,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
)


def text_samples(body: bytes) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): float(s.value)
        for fam in text_string_to_metric_families(body.decode())
        for s in fam.samples
    }


def cell(partition: str, broker: str, kind: str, values: np.ndarray, end_s: int = 10):  # type: ignore[no-untyped-def]
    return WindowHistogram(
        "10s",
        (end_s - 10) * 1_000_000,
        end_s * 1_000_000,
        SeriesKey("c", 't"q', partition, kind, broker),
        SparseHistogram.from_values(LAYOUT, values),
        3 if kind == "e2e" else 0,
    )


def exporter(sent: list[WindowHistogram] | None = None) -> LatencyExporter:
    """An exporter fed two batches of partition windows (``sent`` gets them) with rollups."""
    rng = np.random.default_rng(5)
    exp = LatencyExporter()
    for end_s in (10, 20):
        cells = [
            cell(p, b, kind, rng.lognormal(8, 1, 3_000).astype(int), end_s)
            for p, b in (("0", "1"), ("1", "2"))
            for kind in ("e2e", "publish")
        ]
        if sent is not None:
            sent += cells
        exp.update(with_rollups(cells))
    exp.set_pipeline_health(0.5, 1000.0, 3.0, 42, 1_800_000_000.0)
    return exp


def test_the_exporters_protobuf_body_has_the_text_bodys_samples() -> None:
    exp = exporter()
    pb, text = protobuf_body(exp), text_body(exp)
    assert samples(pb) == text_samples(text)
    assert exp.exposition_parts(PROTOBUF) is exp.exposition_parts(PROTOBUF)  # cached until a change
    names = [f["name"] for f in families(pb)]
    assert len(names) == len(set(names))  # one message per family
    assert "nines_latency_native_seconds" in names and "nines_echoes_total" in names


def test_the_native_histogram_is_the_merged_hdr_rebinned() -> None:
    sent: list[WindowHistogram] = []
    exp = exporter(sent)
    (fam,) = [f for f in families(protobuf_body(exp)) if f["name"] == NATIVE]
    assert fam["type"] == promproto.HISTOGRAM
    assert len(fam["metric"]) == 2  # per topic and kind (partition="all"), as the classic one
    for m in fam["metric"]:
        labels = {p["name"]: p["value"] for p in m["label"]}
        assert labels["partition"] == "all"
        h = m["histogram"]
        mine = [w.hist for w in sent if w.series.kind == labels["kind"]]
        merged = mine[0]
        for other in mine[1:]:
            merged = merged.merge(other)
        expected = rebin(merged, exp.config.native_schema, exp.config.native_max_buckets)
        assert h["schema"] == expected.schema
        assert h.get("zero_count", 0) == expected.zero_count and h["zero_threshold"] > 0
        assert native_buckets(h) == dict(
            zip(expected.index.tolist(), expected.count.tolist(), strict=True)
        )
        assert h["sample_count"] == merged.total == 12_000  # 2 batches x 2 partitions x 3,000
        assert h["sample_sum"] == pytest.approx(merged.sum_us / 1e6)
        assert "bucket" not in h  # no classic buckets: Prometheus keeps it native


def test_the_probes_protobuf_body_has_the_text_bodys_samples() -> None:
    stats = dict.fromkeys(
        ("sent", "acked", "received", "lost", "late_after_loss", "duplicates", "out_of_order"), 4
    )
    snap = {
        "cluster": "c",
        "topic": "t",
        "partitions": {0: {**stats, "send_errors": {"timeout": 1}}},
        "leaders": {0: 1},
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
        "admin_errors": {},
    }
    server = serve(lambda: snap, "127.0.0.1", 0)
    try:
        url = f"http://127.0.0.1:{server.port}/metrics"
        text = urllib.request.urlopen(url, timeout=10).read()
        req = urllib.request.Request(url, headers={"Accept": PROMETHEUS_ACCEPT})
        with urllib.request.urlopen(req, timeout=10) as r:
            assert r.headers["Content-Type"] == promproto.CONTENT_TYPE
            pb = r.read()
    finally:
        server.close()
    # the probe's CPU (and its cgroup's counters) move between the two scrapes: same series
    live = ("nines_probe_cpu_seconds_total", "nines_probe_cgroup_cpu_")
    pb_samples, text_samples_ = samples(pb), text_samples(text)
    assert {k for k in pb_samples if k[0].startswith(live)} == {
        k for k in text_samples_ if k[0].startswith(live)
    }
    assert {k: v for k, v in pb_samples.items() if not k[0].startswith(live)} == {
        k: v for k, v in text_samples_.items() if not k[0].startswith(live)
    }


@pytest.mark.parametrize(
    ("accept", "protobuf"),
    [
        (PROMETHEUS_ACCEPT, True),
        ("", False),
        ("text/plain;version=0.0.4", False),
        ("application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily", False),
        (
            "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;"
            "encoding=delimited;q=0.2,text/plain;q=0.5",
            False,
        ),
        ("application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;"
         "encoding=text", False),
    ],
)  # fmt: skip
def test_content_negotiation(accept: str, protobuf: bool) -> None:
    assert promproto.wants_protobuf(accept) is protobuf


def test_each_format_is_gzipped_once_and_served_with_its_type() -> None:
    exp = exporter()
    server = exp.serve("127.0.0.1", 0)
    try:
        url = f"http://127.0.0.1:{server.port}/metrics"
        got = {}
        for accept in (PROMETHEUS_ACCEPT, "text/plain", PROMETHEUS_ACCEPT):
            req = urllib.request.Request(url, headers={"Accept": accept, "Accept-Encoding": "gzip"})
            with urllib.request.urlopen(req, timeout=10) as r:
                got.setdefault(r.headers["Content-Type"], []).append(gzip.decompress(r.read()))
        packers = dict(server._gzipped)
    finally:
        server.close()
    assert got[promproto.CONTENT_TYPE] == [protobuf_body(exp)] * 2
    assert got["text/plain; version=0.0.4; charset=utf-8"] == [text_body(exp)]
    # the second protobuf scrape (the text one between them) was not compressed again
    assert packers[promproto.CONTENT_TYPE].deflated_bytes == len(protobuf_body(exp))


@pytest.mark.parametrize("n", [0, 1, 127, 128, 300, 2**31 - 1, 2**32, 2**63 - 1])
def test_varints_and_zigzag_decode_back(n: int) -> None:
    from testkit.promproto_decode import _unzigzag, read_varint

    assert read_varint(promproto.varint(n), 0) == (n, len(promproto.varint(n)))
    for signed in (n, -n, -n - 1):
        if -(2**63) <= signed < 2**63:
            assert _unzigzag(promproto.zigzag(signed)) == signed


def test_an_empty_native_histogram_still_reads_as_native() -> None:
    """No observation yet: the spec's no-op span and a nonzero zero threshold say "native"."""
    from testkit.promproto_decode import decode

    msg = promproto.native_histogram(promproto.labels({"a": "b"}), 0, 0.0, 8, 2.0**-128, 0, [], [])
    body = b"".join(promproto.family(promproto.family_head("h", "x", promproto.HISTOGRAM), [msg]))
    (fam,) = families(body)
    h = fam["metric"][0]["histogram"]
    assert h["positive_span"] == [{"offset": 0, "length": 0}]
    assert h["zero_threshold"] > 0 and h["schema"] == 8
    assert decode("LabelPair", promproto.label("q", "0.5")[2:]) == {"name": "q", "value": "0.5"}


def test_prometheus_client_histograms_and_untyped_families_encode() -> None:
    from prometheus_client.core import HistogramMetricFamily, UnknownMetricFamily

    hist = HistogramMetricFamily("h_seconds", "x", labels=["a"])
    hist.add_metric(["1"], [("0.1", 2), ("1.0", 5), ("+Inf", 7)], 3.5)
    unknown = UnknownMetricFamily("u", "y", value=4.0)
    body = promproto.encode_families([hist, unknown])
    assert samples(body) == {
        ("h_seconds_bucket", (("a", "1"), ("le", "0.1"))): 2.0,
        ("h_seconds_bucket", (("a", "1"), ("le", "1.0"))): 5.0,
        ("h_seconds_bucket", (("a", "1"), ("le", "+Inf"))): 7.0,
        ("h_seconds_count", (("a", "1"),)): 7.0,
        ("h_seconds_sum", (("a", "1"),)): 3.5,
        ("u", ()): 4.0,
    }
    assert [f["type"] for f in families(body)] == [promproto.HISTOGRAM, promproto.UNTYPED]


def test_a_series_of_zeros_only_is_a_native_histogram_of_its_zero_bucket() -> None:
    """A hiccup series can be all 0 µs: only the zero bucket, and the no-op span."""
    exp = LatencyExporter()
    zeros = SparseHistogram.from_values(LAYOUT, [0] * 5)
    exp.update([WindowHistogram("10s", 0, 10_000_000, SeriesKey("c", "", "all", "hiccup"), zeros)])
    (fam,) = [f for f in families(protobuf_body(exp)) if f["name"] == NATIVE]
    h = fam["metric"][0]["histogram"]
    assert (h["sample_count"], h["zero_count"], native_buckets(h)) == (5, 5, {})
    assert samples(protobuf_body(exp)) == text_samples(text_body(exp))


def test_a_series_past_the_bucket_limit_is_degraded_as_prometheus_does_and_stays_so() -> None:
    """Prometheus (``native_histogram_bucket_limit``) halves the resolution, merging bucket
    pairs, one schema at a time until the buckets fit; client_golang then keeps the coarser
    schema (a finer one later would not be a counter reset). The exporter does both: a wide
    window degrades the series; a narrow one after it is added at the degraded schema."""
    rng = np.random.default_rng(3)
    key = SeriesKey("c", "t", "all", "e2e")
    wide = SparseHistogram.from_values(LAYOUT, rng.lognormal(8.5, 1.5, 50_000).astype(int) + 1)
    narrow = SparseHistogram.from_values(LAYOUT, rng.lognormal(8.5, 0.05, 5_000).astype(int) + 1)
    exp = LatencyExporter()  # schema 8, at most 160 buckets: the defaults
    hists = []
    for end_s, hist in ((10, wide), (20, narrow)):
        exp.update([WindowHistogram("10s", (end_s - 10) * 1_000_000, end_s * 1_000_000, key, hist)])
        (fam,) = [f for f in families(protobuf_body(exp)) if f["name"] == NATIVE]
        hists.append(fam["metric"][0]["histogram"])
    first, second = hists
    assert first["schema"] < 8 and len(native_buckets(first)) <= 160
    fine = rebin(wide, first["schema"] + 1, 10**9)  # one step finer would not have fitted
    assert fine.index.size > 160
    pairs: dict[int, int] = {}  # Prometheus' reduceResolution: bucket i goes to ((i - 1) >> 1) + 1
    for i, c in zip(fine.index.tolist(), fine.count.tolist(), strict=True):
        pairs[((i - 1) >> 1) + 1] = pairs.get(((i - 1) >> 1) + 1, 0) + c
    assert native_buckets(first) == pairs
    assert rebin(narrow, 8, 160).schema == 8  # alone, the narrow window would fit schema 8
    assert second["schema"] == first["schema"]  # but the series keeps its coarser schema
    merged = rebin(wide.merge(narrow), first["schema"], 160)
    assert native_buckets(second) == dict(
        zip(merged.index.tolist(), merged.count.tolist(), strict=True)
    )
    assert second["sample_count"] == 55_000
