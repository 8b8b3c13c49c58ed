"""The scrape stays small: per-topic histograms by default, every queried ``le`` exported, bytes
per series bounded (docs/metrics.md, scrape cost)."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import numpy as np
import pytest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.utils import floatToGoString

from core.config import ConfigError
from core.hdr import HdrLayout, SparseHistogram
from core.sla import BUCKET_BOUNDARIES_S, parse_sla
from core.windows import SeriesKey, WindowHistogram, with_topic_rollups
from monitor.alerts.rules import render_rules
from monitor.exporter import ExporterConfig, LatencyExporter
from runtime.config_io import load_sla
from runtime.webserver import GZIP_LEVEL
from testkit.exporter import prerender_cpu_s, protobuf_body, text_body, wait_prerendered

ROOT = Path(__file__).parents[3]
LAYOUT = HdrLayout()
HISTOGRAM = "nines_latency_classic_seconds"
LE = re.compile(r'\ble\s*(=~|!=|!~|=)\s*"([^"]*)"')

#: The scrape budget is 5 MB on the wire (gzip) at 10,000 probe partitions: 500 bytes each
#: (bench.cardinality measures 475); 120 partitions compress less well (550 bytes each).
GZIP_BYTES_PER_PARTITION = 600
#: Plain text per (cluster, topic, partition, kind) series at three resolutions; with per-partition
#: histograms it was 5,100 bytes. The topics' held peaks add 0.3 % here (4 topics over 120
#: partitions), 0.03 % at 10,000 partitions (bench.cardinality).
BYTES_PER_KIND_SERIES = 2_620


def windows(
    partitions: int, res: str = "10s", span_s: int = 10, rate_per_s: int = 100, seed: int = 0
) -> list[WindowHistogram]:
    """One window per partition and kind, each with its own latencies, plus the topic merges."""
    rng = np.random.default_rng(seed)
    out = []
    for p in range(partitions):
        for kind in ("e2e", "publish", "send_lag"):
            values = rng.lognormal(np.log(rng.uniform(2_000, 20_000)), 0.8, 1_000)
            drawn = SparseHistogram.from_values(LAYOUT, values.astype(np.int64) + 1)
            scale = max(1, rate_per_s * span_s // 1_000)
            hist = SparseHistogram(
                LAYOUT, drawn.index, drawn.count * scale, drawn.max_us, drawn.sum_us * scale
            )
            key = SeriesKey("c", f"t{p % 4}", str(p), kind)
            out.append(WindowHistogram(res, 0, span_s * 1_000_000, key, hist, lost=p % 3))
    return with_topic_rollups(out)


def histogram_samples(exp: LatencyExporter) -> dict[tuple[str, ...], float]:
    """(suffix, topic, partition, kind, le) → value of every histogram sample."""
    out: dict[tuple[str, ...], float] = {}
    for fam in text_string_to_metric_families(text_body(exp).decode()):
        for s in fam.samples:
            if s.name.startswith(HISTOGRAM):
                key = (s.name[len(HISTOGRAM) :], s.labels["topic"], s.labels["partition"])
                out[(*key, s.labels["kind"], s.labels.get("le", ""))] = s.value
    return out


def test_histograms_are_per_topic_by_default_and_sum_the_partitions() -> None:
    ws = windows(8) + windows(8, seed=1)  # two batches of the same windows: cumulative
    per_topic, per_partition = (
        LatencyExporter(),
        LatencyExporter(ExporterConfig(partition_histograms=True)),
    )
    for exp in (per_topic, per_partition):
        exp.update(ws[: len(ws) // 2])
        exp.update(ws[len(ws) // 2 :])
    topic, partition = histogram_samples(per_topic), histogram_samples(per_partition)
    assert {k[2] for k in topic} == {"all"} and "all" not in {k[2] for k in partition}
    summed: dict[tuple[str, ...], float] = {}
    for (suffix, t, _, kind, le), v in partition.items():
        summed[(suffix, t, "all", kind, le)] = summed.get((suffix, t, "all", kind, le), 0) + v
    assert topic.keys() == summed.keys()
    for key, value in topic.items():
        assert value == pytest.approx(summed[key], rel=1e-9), key
    # what the burn-rate rules and the SLO panel read (sum by topic) is the same in both modes
    body = text_body(per_topic).decode()
    assert 'nines_echoes_total{cluster="c",partition="3",topic="t3"}' in body  # counters: as before


def queried_les() -> set[str]:
    """Every ``le`` a committed dashboard, the shipped rules or a valid SLA's rules select."""
    texts = [p.read_text() for p in (ROOT / "dashboards" / "json").glob("*.json")]
    texts += [p.read_text() for p in (ROOT / "helm" / "nines" / "files").glob("*.yaml")]
    texts.append(json.dumps(render_rules(load_sla(ROOT / "examples" / "sla.yaml"))))
    valid = 0
    for threshold in BUCKET_BOUNDARIES_S:  # every threshold a burn-rate objective may use
        objective = {"name": "burn", "quantile": 0.999, "threshold": threshold, "objective": 0.99}
        try:
            sla = parse_sla({"objectives": [objective]})
        except ConfigError:  # below a millisecond: PromQL durations cannot say it
            continue
        valid += 1
        texts.append(json.dumps(render_rules(sla)))
    assert valid >= 20
    found = set()
    for text in texts:
        for op, value in LE.findall(text.replace('\\"', '"')):
            assert op == "=", f"le{op}{value!r}: only exact le matchers can be checked"
            found.add(value)
    return found


def test_every_le_a_rule_or_panel_queries_is_exported() -> None:
    used = queried_les()
    assert "0.05" in used  # the SLO panel and the example SLA: the scan sees them
    exp = LatencyExporter()
    exp.update(windows(2))
    exported = {k[4] for k in histogram_samples(exp) if k[0] == "_bucket"}
    assert used <= exported, sorted(used - exported)
    assert {floatToGoString(b) for b in BUCKET_BOUNDARIES_S} <= exported


def test_scrape_bytes_per_series_are_bounded() -> None:
    """At 100 msgs/s per partition (the probe's default) and three resolutions."""
    partitions = 120
    exp = LatencyExporter(ExporterConfig(max_series=partitions + 4))
    for seed, (res, span_s) in enumerate((("10s", 10), ("1m", 60), ("1h", 3600))):
        exp.update(windows(partitions, res, span_s, seed=seed))
    body = text_body(exp)
    kind_series = partitions * 3
    assert len(body) / kind_series <= BYTES_PER_KIND_SERIES, len(body) / kind_series
    wire = len(gzip.compress(body, compresslevel=GZIP_LEVEL))
    assert wire / partitions <= GZIP_BYTES_PER_PARTITION, wire / partitions


#: The protobuf scrape at 1,000 probe partitions (three kinds, three resolutions), on the wire as
#: a Prometheus with native histograms on receives it (protobuf, gzip): measured 543 bytes per
#: partition, 680 with the quantile gauges in series order and the body gzipped whole at level 4.
#: At 10,000 partitions more quantiles share a value and it is 500 (the 5 MB budget; the bench).
PB_GZIP_BYTES_PER_PARTITION = 600
#: Raw protobuf per (cluster, topic, partition, kind) series at three resolutions (2,067 measured):
#: what a ``body_size_limit`` counts.
PB_BYTES_PER_KIND_SERIES = 2_300


def test_protobuf_scrape_bytes_per_series_are_bounded() -> None:
    """The budget holds for the body Prometheus 2.x asks for with native histograms on: every
    family in protobuf, scraped over HTTP with gzip."""
    import urllib.request

    from core import promproto

    partitions = 1_000
    exp = LatencyExporter(ExporterConfig(max_series=partitions + 4))
    for seed, (res, span_s) in enumerate((("10s", 10), ("1m", 60), ("1h", 3600))):
        exp.update(windows(partitions, res, span_s, seed=seed))
    server = exp.serve("127.0.0.1", 0)
    try:
        req = urllib.request.Request(
            f"http://127.0.0.1:{server.port}/metrics",
            headers={
                "Accept": promproto.CONTENT_TYPE + ",text/plain;version=0.0.4;q=0.5",
                "Accept-Encoding": "gzip",
            },
        )
        with urllib.request.urlopen(req, timeout=60) as r:
            assert r.headers["Content-Type"] == promproto.CONTENT_TYPE
            wire = r.read()
    finally:
        server.close()
    body = gzip.decompress(wire)
    assert body == protobuf_body(exp)
    assert len(wire) / partitions <= PB_GZIP_BYTES_PER_PARTITION, len(wire) / partitions
    assert len(body) / (3 * partitions) <= PB_BYTES_PER_KIND_SERIES, len(body) / (3 * partitions)


def test_hand_written_counters_are_what_prometheus_client_would_write() -> None:
    from prometheus_client import generate_latest

    from monitor.exporter import contract, samples, text
    from streaming.counters import COUNTER_FIELDS, StreamCounters

    odd = 'we"ird\\topic\n{x}'
    job = StreamCounters(
        echoes={("c", odd, "0"): 3, ("c", "t", "10"): 2**40, ("c", "t", "2"): 0},
        lost={("c", "t", "0"): 1},
        late={},
        overflow={SeriesKey("c", odd, "0", "e2e"): 4, SeriesKey("b", "t", "0", "hiccup"): 1},
        bad={"not_json": 5, "future": 0},
        data_loss={("echo", "0"): 6},
    )
    counters = {name: getattr(job, name) for name in COUNTER_FIELDS}
    families = text._Families(list(contract.counter_families(counters)))
    assert samples.counter_text(counters) == generate_latest(families)  # type: ignore[arg-type]


def test_partition_histograms_is_a_validated_stream_key() -> None:
    from core.config import build
    from monitor.pipeline import PipelineConfig as StreamConfig  # the `stream:` section

    assert build(StreamConfig, {"bootstrap": "x:1"}).partition_histograms is False
    assert build(
        StreamConfig, {"bootstrap": "x:1", "partition_histograms": True}
    ).partition_histograms
    with pytest.raises(ConfigError, match=r"^partition_histograms: .*boolean") as bad:
        build(StreamConfig, {"bootstrap": "x:1", "partition_histograms": "maybe"})
    assert "\n" not in str(bad.value)


def test_a_scrape_encodes_only_the_resolutions_whose_windows_changed_and_each_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The work of a scrape is bounded by what changed: after 10 s windows only that resolution's
    rows are encoded and compressed again, windows superseded before a scrape are never
    encoded, and an unchanged body is not encoded at all."""
    from core import gzip_parts
    from monitor.exporter.render import PROTOBUF, TEXT

    monkeypatch.setattr(gzip_parts, "MIN_CACHED_BYTES", 4096)  # chunks of 60 partitions
    partitions = 60
    exp = LatencyExporter(ExporterConfig(max_series=partitions + 4))
    batches = {
        res: windows(partitions, res, span_s, seed=seed)
        for seed, (res, span_s) in enumerate((("10s", 10), ("1m", 60), ("1h", 3600)))
    }
    for batch in batches.values():
        exp.update(batch)
    rows = {res: len({w.series for w in batch}) for res, batch in batches.items()}
    packers = {fmt: gzip_parts.PartsGzip(6) for fmt in (TEXT, PROTOBUF)}
    for fmt, packer in packers.items():
        packer.compress(exp.exposition_parts(fmt))
    assert exp.renderer.encoded_rows == {TEXT: sum(rows.values()), PROTOBUF: sum(rows.values())}
    for fmt, packer in packers.items():
        for other, its in packers.items():  # both bodies up to date
            its.compress(exp.exposition_parts(other))
        before, deflated = exp.renderer.encoded_rows[fmt], packer.deflated_bytes
        for _ in range(6):  # a minute of 10 s batches between two scrapes
            exp.update(batches["10s"])
        parts = exp.exposition_parts(fmt)
        packer.compress(parts)
        assert exp.renderer.encoded_rows[fmt] - before == rows["10s"]  # once, not six times
        size = sum(len(p) for p in parts)
        # the 1 m and 1 h chunks (over half the body) are the same objects: not compressed again
        assert packer.deflated_bytes - deflated < size / 2
        assert exp.exposition_parts(fmt) is parts  # nothing changed: nothing encoded
        assert exp.renderer.encoded_rows[fmt] - before == rows["10s"]
        exp.update([w for batch in batches.values() for w in batch])
        deflated, parts = packer.deflated_bytes, exp.exposition_parts(fmt)
        packer.compress(parts)
        assert exp.renderer.encoded_rows[fmt] - before == 2 * rows["10s"] + rows["1m"] + rows["1h"]
        # every resolution changed: all of it compressed again
        assert packer.deflated_bytes - deflated == sum(len(p) for p in parts)


def test_coarse_windows_are_encoded_and_deflated_before_the_scrape(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Once an hour every resolution's windows close at once; the 1 m and 1 h chunks are encoded
    and deflated by the pre-render worker when they arrive, so the next scrape encodes and
    compresses only the 10 s rows, as every other scrape does, and sends the same bytes as an
    exporter that renders everything in the scrape. A format nobody scraped is not rendered."""
    from core import gzip_parts
    from monitor.exporter.render import PROTOBUF, TEXT

    monkeypatch.setattr(gzip_parts, "MIN_CACHED_BYTES", 4096)  # chunks of 60 partitions
    partitions = 60
    config = ExporterConfig(max_series=partitions + 4)
    spans = (("10s", 10), ("1m", 60), ("1h", 3600))

    def hour(seed: int) -> dict[str, list[WindowHistogram]]:
        return {
            res: windows(partitions, res, span, seed=seed + i)
            for i, (res, span) in enumerate(spans)
        }

    clock = [0.0]  # the text-only exporter's: its scraper goes away
    pre, plain = LatencyExporter(config), LatencyExporter(config)
    text_only = LatencyExporter(config, clock=lambda: clock[0])
    for exp in (pre, plain, text_only):
        for batch in hour(0).values():
            exp.update(batch)
    rows = {res: len({w.series for w in batch}) for res, batch in hour(0).items()}
    packers = {fmt: gzip_parts.PartsGzip(6) for fmt in (TEXT, PROTOBUF)}
    text_packers = {fmt: gzip_parts.PartsGzip(6) for fmt in (TEXT, PROTOBUF)}
    pre.renderer.prerender(packers)
    text_only.renderer.prerender(text_packers)
    for fmt, packer in packers.items():
        packer.compress(pre.exposition_parts(fmt))
    text_packers[TEXT].compress(text_only.exposition_parts(TEXT))

    def same_bodies(seed: int) -> None:
        for fmt, packer in packers.items():
            body = b"".join(plain.exposition_parts(fmt))
            assert gzip.decompress(packer.compress(pre.exposition_parts(fmt))) == body, (seed, fmt)

    for seed in (10, 20):  # the hourly windows arrive; the scrape comes after the worker ran
        before = dict(pre.renderer.encoded_rows)
        for batch in hour(seed).values():
            for exp in (pre, plain, text_only):
                exp.update(batch)
        assert wait_prerendered(pre, 30) and wait_prerendered(text_only, 30)
        for fmt in (TEXT, PROTOBUF):  # both scraped formats: their coarse rows encoded ahead
            assert pre.renderer.encoded_rows[fmt] - before[fmt] == rows["1m"] + rows["1h"]
        deflated = {fmt: packer.deflated_bytes for fmt, packer in packers.items()}
        for fmt, packer in packers.items():
            parts = pre.exposition_parts(fmt)
            packer.compress(parts)
            # + the 10 s rows
            assert pre.renderer.encoded_rows[fmt] - before[fmt] == sum(rows.values())
            # the 1 m and 1 h chunks (over half the body) were deflated ahead: not in the scrape
            assert packer.deflated_bytes - deflated[fmt] < sum(len(p) for p in parts) / 2
            assert packer.primed_bytes > 0
        same_bodies(seed)
    assert prerender_cpu_s(pre) > 0

    # nobody scraped protobuf there: neither rendered nor deflated
    assert text_only.renderer.encoded_rows[PROTOBUF] == 0
    assert text_only.renderer.encoded_rows[TEXT] == 3 * sum(rows.values()) - 2 * rows["10s"]
    assert text_packers[PROTOBUF].deflated_bytes == 0 < text_packers[TEXT].primed_bytes
    # nor a format not scraped within peak_hold (longer than any scrape interval)
    clock[0] += config.peak_hold + 1
    encoded = dict(text_only.renderer.encoded_rows)
    for batch in hour(60).values():
        text_only.update(batch)
    assert wait_prerendered(text_only, 30)
    assert text_only.renderer.encoded_rows == encoded

    # a scrape that comes while the worker runs: the same body, each row encoded once, no
    # part deflated twice
    for seed in (30, 40, 50):
        before = dict(pre.renderer.encoded_rows)
        deflated = {fmt: packer.deflated_bytes for fmt, packer in packers.items()}
        for batch in hour(seed).values():
            for exp in (pre, plain):
                exp.update(batch)
        same_bodies(seed)
        assert wait_prerendered(pre, 30)
        for fmt, packer in packers.items():
            assert pre.renderer.encoded_rows[fmt] - before[fmt] == sum(rows.values()), (seed, fmt)
            size = sum(len(p) for p in pre.exposition_parts(fmt))
            assert packer.deflated_bytes - deflated[fmt] <= size, (seed, fmt)
