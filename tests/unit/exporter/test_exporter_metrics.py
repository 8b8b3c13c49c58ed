"""The exporter's exposition: gated quantiles, exact max, cumulative histogram, counters."""

from __future__ import annotations

import dataclasses
import urllib.request

import numpy as np
import pytest
from exposition_lint import promtool_findings
from prometheus_client.parser import text_string_to_metric_families

from core.echo import BAD_REASONS
from core.hdr import HdrLayout, SparseHistogram, rank_for_quantile
from core.windows import SeriesKey, WindowHistogram, with_topic_rollups
from monitor.exporter import DEFAULT_LE, ExporterConfig, LatencyExporter
from testkit.exporter import text_body

LAYOUT = HdrLayout()


def window(values, partition="0", res="10s", start_s=0, lost=0, kind="e2e") -> WindowHistogram:  # type: ignore[no-untyped-def]
    span = {"10s": 10, "1m": 60}[res]
    return WindowHistogram(
        res,
        start_s * 1_000_000,
        (start_s + span) * 1_000_000,
        SeriesKey("c", "t", partition, kind),
        SparseHistogram.from_values(LAYOUT, values),
        lost,
    )


def le_counts(values: list[int]) -> list[int]:
    """Cumulative ``le`` counts of the input: a sample counts once its HDR bucket lies entirely
    at or below the bound (+Inf: all of them)."""
    highs = [int(LAYOUT.highest_value_at(LAYOUT.index_of(v))) for v in values]
    return [sum(h <= int(le * 1e6) for h in highs) for le in DEFAULT_LE] + [len(values)]


def scrape(exp: LatencyExporter) -> dict[str, list]:  # type: ignore[type-arg]
    text = text_body(exp).decode()
    out: dict[str, list] = {}  # type: ignore[type-arg]
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out.setdefault(s.name, []).append(s)
    return out


def test_quantiles_are_gated_by_sample_size_and_max_is_exact() -> None:
    exp = LatencyExporter()
    rng = np.random.default_rng(3)
    values = rng.integers(1000, 5000, 500)
    values[17] = 1_234_567
    exp.update([window(values)])
    samples = scrape(exp)
    quantiles = {s.labels["q"] for s in samples["nines_latency_seconds"]}
    assert quantiles == {"0.5", "0.9", "0.99"}  # 500 samples: p99 yes, p99.9 no
    srt = sorted(values)
    for s in samples["nines_latency_seconds"]:
        q = float(s.labels["q"])
        exact_us = srt[rank_for_quantile(q, len(srt)) - 1]  # nearest rank of the input
        assert exact_us <= s.value * 1e6 <= exact_us * (1 + 2e-3) + 1, (q, s.value, exact_us)
    (mx,) = samples["nines_latency_max_seconds"]
    assert mx.value == pytest.approx(1.234567)
    (n,) = samples["nines_latency_window_samples"]
    assert n.value == 500
    exp.update([window(rng.integers(1000, 5000, 1000), start_s=10)])
    quantiles = {s.labels["q"] for s in scrape(exp)["nines_latency_seconds"]}
    assert "0.999" in quantiles and "0.9999" not in quantiles


def test_histogram_is_cumulative_over_finest_windows_only() -> None:
    exp = LatencyExporter(ExporterConfig(partition_histograms=True))
    a = [100, 2_000, 60_000, 3_000_000]
    b = [150, 40_000]
    ws = with_topic_rollups([window(a), window(b, partition="1")])
    coarse = with_topic_rollups([window(a + b, res="1m")])
    exp.update(ws + coarse)
    exp.update([window([500], start_s=10)])
    s = scrape(exp)
    counts = {(x.labels["partition"]): x.value for x in s["nines_latency_classic_seconds_count"]}
    assert counts == {"0": 5, "1": 2}  # no partition="all", no 1m double count
    buckets = [x for x in s["nines_latency_classic_seconds_bucket"] if x.labels["partition"] == "0"]
    values = [x.value for x in buckets]
    samples_0 = [*a, 500]  # partition 0's finest windows
    assert values == le_counts(samples_0)
    le = {x.labels["le"]: x.value for x in buckets}
    assert (
        le["0.001"] == 2
        and le["0.0025"] == 3
        and le["0.05"] == 3
        and le["0.1"] == 4
        and le["2.5"] == 4
    )
    assert len(buckets) == len(DEFAULT_LE) + 1
    echoes = {x.labels["partition"]: x.value for x in s["nines_echoes_total"]}
    assert echoes == {"0": 5, "1": 2}
    bad = {x.labels["reason"]: x.value for x in s["nines_bad_echoes_total"]}
    assert bad["not_json"] == 0 and set(bad) == set(BAD_REASONS)  # new reasons: automatic
    # the 1m window is exported as a gauge with its own window label, and the rollup too
    maxes = {(x.labels["window"], x.labels["partition"]) for x in s["nines_latency_max_seconds"]}
    assert ("1m", "all") in maxes and ("10s", "all") in maxes


def test_pipeline_health_and_promtool_lint_and_http() -> None:
    exp = LatencyExporter()
    exp.update([window([1, 2, 3], lost=1)])
    exp.set_pipeline_health(0.5, 1000.0, 3.0, 42, 1_800_000_000.0)
    s = scrape(exp)
    assert s["nines_stream_batches_total"][0].value == 1
    assert s["nines_stream_state_rows"][0].value == 42
    assert s["nines_latency_window_lost"][0].value == 1
    assert promtool_findings(text_body(exp)) == []
    server = exp.serve("127.0.0.1", 0)
    try:
        body = urllib.request.urlopen(f"http://127.0.0.1:{server.port}/metrics", timeout=5).read()
        assert b"nines_latency_max_seconds" in body
    finally:
        server.close()


def test_every_stream_counter_is_exported_cumulatively() -> None:
    """Each StreamCounters field has its counter family, and batches add up."""
    from monitor.exporter.contract import COUNTER_FAMILIES
    from streaming.counters import COUNTER_FIELDS, StreamCounters

    assert list(COUNTER_FIELDS) == [f.name for f in dataclasses.fields(StreamCounters)]
    assert set(COUNTER_FAMILIES) == set(COUNTER_FIELDS)
    exp = LatencyExporter()
    batch = StreamCounters(
        echoes={("c", "t", "0"): 3},
        lost={("c", "t", "0"): 1},
        late={("c", "t", "0"): 2},
        overflow={SeriesKey("c", "t", "0", "e2e"): 4},
        bad={"not_json": 5},
        data_loss={("t", "0"): 6},
        offsets_reset={("t", "1"): 9},
        systems={("c", "nats"): 7, ("intruder", "redis"): 8},
    )
    exp.update([window([1_000])], batch)  # cluster "c" has a series; "intruder" none
    exp.update([], batch)
    s = scrape(exp)
    for name, (family, _, _) in COUNTER_FAMILIES.items():
        value = next(iter(getattr(batch, name).values()))
        got = [x.value for x in s[f"{family}_total"] if x.value]
        assert got == [2 * value], name
    # a system is exported only for a cluster with an admitted series: bounded by max_series
    assert [x.labels for x in s["nines_system_echoes_total"]] == [
        {"cluster": "c", "system": "nats"}
    ]


def test_prerendered_lines_parse_back_escape_and_follow_the_latest_window() -> None:
    import gzip

    exp = LatencyExporter(ExporterConfig(partition_histograms=True))
    odd = 'we"ird\\topic\nx'
    w = WindowHistogram(
        "10s", 0, 10_000_000, SeriesKey("c", odd, "0", "e2e"),
        SparseHistogram.from_values(LAYOUT, list(range(1, 2001))), 2,
    )  # fmt: skip
    exp.update([w, window([5_000] * 100, start_s=0)])
    s = scrape(exp)
    topics = {x.labels["topic"] for x in s["nines_latency_max_seconds"]}
    assert topics == {odd, "t"}  # escaped on the way out, the same value after parsing
    q = {x.labels["q"]: x.value for x in s["nines_latency_seconds"] if x.labels["topic"] == odd}
    assert set(q) == {"0.5", "0.9", "0.99", "0.999"}  # 2,000 samples support three nines only
    assert q["0.999"] == pytest.approx(w.hist.value_at_quantile(0.999) / 1e6)
    # a newer window of the same series replaces the older one's lines; an older one does not
    exp.update([window([9_000] * 10, start_s=10)])
    exp.update([window([1] * 10, start_s=0)])
    maxes = [x for x in scrape(exp)["nines_latency_max_seconds"] if x.labels["topic"] == "t"]
    assert [m.value for m in maxes] == [pytest.approx(0.009)]
    # the cumulative histogram: buckets rise to +Inf, which equals _count
    h = scrape(exp)
    series = [x for x in h["nines_latency_classic_seconds_bucket"] if x.labels["topic"] == "t"]
    counts = [x.value for x in series]
    finest = [5_000] * 100 + [9_000] * 10 + [1] * 10  # every finest window of topic t
    assert counts == le_counts(finest)
    assert series[-1].labels["le"] == "+Inf"
    (count,) = [x for x in h["nines_latency_classic_seconds_count"] if x.labels["topic"] == "t"]
    assert count.value == counts[-1] == 120
    server = exp.serve("127.0.0.1", 0)
    try:
        req = urllib.request.Request(
            f"http://127.0.0.1:{server.port}/metrics", headers={"Accept-Encoding": "gzip"}
        )
        with urllib.request.urlopen(req, timeout=5) as resp:
            assert resp.headers["Content-Encoding"] == "gzip"
            assert resp.headers["Content-Type"].startswith("text/plain; version=0.0.4")
            assert gzip.decompress(resp.read()) == text_body(exp)
    finally:
        server.close()


def test_exposition_is_what_prometheus_client_would_write() -> None:
    """The hand-rendered families, byte for byte against prometheus_client's own rendering."""
    from prometheus_client import generate_latest
    from prometheus_client.core import GaugeMetricFamily, HistogramMetricFamily
    from prometheus_client.utils import floatToGoString

    from core.hdr import REPORTED_QUANTILES, min_samples_for

    rng = np.random.default_rng(11)
    windows = [
        window(rng.lognormal(8, 1, n).astype(np.int64) + 1, partition=p, res=res, kind=kind)
        for n, p, res, kind in (
            (5000, "0", "10s", "e2e"), (120, "1", "10s", "e2e"), (50, "0", "1m", "publish"),
        )
    ]  # fmt: skip
    exp = LatencyExporter(ExporterConfig(partition_histograms=True))
    exp.update(windows)
    labels = ["cluster", "topic", "partition", "kind", "window"]
    q = GaugeMetricFamily("nines_latency_seconds", "x", labels=[*labels, "q"])
    mx = GaugeMetricFamily("nines_latency_max_seconds", "x", labels=labels)
    n = GaugeMetricFamily("nines_latency_window_samples", "x", labels=labels)
    lost = GaugeMetricFamily("nines_latency_window_lost", "x", labels=labels)
    hist = HistogramMetricFamily("nines_latency_classic_seconds", "x", labels=labels[:4])
    for w in sorted(windows, key=lambda w: (w.resolution, w.series.partition, w.series.kind)):
        s = w.series
        lv = [s.cluster, s.topic, s.partition, s.kind, w.resolution]
        for quantile in REPORTED_QUANTILES:
            if w.hist.total >= min_samples_for(quantile):
                q.add_metric(
                    [*lv, floatToGoString(quantile)], w.hist.value_at_quantile(quantile) / 1e6
                )
        mx.add_metric(lv, w.hist.max_us / 1e6)
        n.add_metric(lv, w.hist.total)
        if s.kind == "e2e":
            lost.add_metric(lv, w.lost)
        if w.resolution == "10s":
            counts = [w.hist.count_at_or_below(int(le * 1e6)) for le in DEFAULT_LE]
            buckets = [(floatToGoString(le), c) for le, c in zip(DEFAULT_LE, counts, strict=True)]
            hist.add_metric(lv[:4], [*buckets, ("+Inf", w.hist.total)], w.hist.sum_us / 1e6)

    class Families:
        def collect(self) -> list:  # type: ignore[type-arg]
            return [q, mx, n, lost, hist]

    def samples(text: bytes) -> list[str]:
        return [line for line in text.decode().splitlines() if not line.startswith("#")]

    mine = samples(text_body(exp))
    for line in samples(generate_latest(Families())):  # type: ignore[arg-type]
        assert line in mine, line
    assert sum(line.startswith("nines_latency_seconds{") for line in mine) == len(q.samples)
