"""A real Prometheus (Debian's 2.42 with its feature flag; 3.x with ``scrape_native_histograms``)
reads nines' protobuf exposition: every sample of both endpoints, and the native histogram's
buckets.

With native histograms on, Prometheus asks every target for the protobuf format, so this is
the encoding checked against the format's owner, not only against our own decoder. The
pipeline test (a probe, the stream job and a CTRL+Z stall) is ``test_native_ctrl_z_e2e``.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import numpy as np
from e2e_servers import Prometheus, wait_until
from prometheus_client.parser import text_string_to_metric_families
from prometheus_releases import PrometheusRelease

from core import promproto
from core.hdr import HdrLayout, SparseHistogram
from core.windows import SeriesKey, WindowHistogram, with_rollups
from monitor.exporter import LatencyExporter
from monitor.exporter.contract import NATIVE
from monitor.exporter.native import bucket_width
from probes.metrics import serve
from testkit.exporter import protobuf_body, text_body
from testkit.promproto_decode import families

#: Probe series read live at each scrape (they move between two scrapes).
VOLATILE = re.compile(r"nines_probe_(cpu_seconds_total|cgroup_cpu_\w+)$")
LAYOUT = HdrLayout()
#: scrape-time series Prometheus adds to every target
SYNTHETIC = ("up", "scrape_duration_seconds", "scrape_samples_scraped",
             "scrape_samples_post_metric_relabeling", "scrape_series_added")  # fmt: skip


def text_samples(body: bytes) -> dict[tuple[tuple[str, str], ...], float]:
    """(sorted labels with __name__) → value of a text scrape."""
    return {
        tuple(sorted({**s.labels, "__name__": s.name}.items())): float(s.value)
        for fam in text_string_to_metric_families(body.decode())
        for s in fam.samples
    }


def prometheus_samples(prom: Prometheus, job: str) -> dict[tuple[tuple[str, str], ...], float]:
    """Every float series Prometheus holds for ``job``, as it scraped it last."""
    out = {}
    for r in prom.query(f'{{job="{job}"}}'):
        labels = {k: v for k, v in r["metric"].items() if k not in ("job", "instance")}
        if "value" in r and labels["__name__"] not in SYNTHETIC:
            out[tuple(sorted(labels.items()))] = float(r["value"][1])
    return out


def stall_windows() -> list[WindowHistogram]:
    """Two partitions' 10 s windows: a healthy millisecond body, and one with a 6 s tail."""
    rng = np.random.default_rng(11)
    out = []
    for end_s, tail in ((10, False), (20, True), (30, False)):
        for p, broker in (("0", "1"), ("1", "2")):
            values = rng.lognormal(np.log(2_000), 0.4, 5_000)
            if tail:
                values = np.concatenate([values, np.linspace(1_000, 6_000_000, 60)])
            out.append(
                WindowHistogram(
                    "10s",
                    (end_s - 10) * 1_000_000,
                    end_s * 1_000_000,
                    SeriesKey("pb", "nines.probe", p, "e2e", broker),
                    SparseHistogram.from_values(LAYOUT, values.astype(np.int64)),
                    1,
                )
            )
    return out


def probe_snapshot() -> dict[str, Any]:
    stats = dict.fromkeys(
        ("sent", "acked", "received", "lost", "late_after_loss", "duplicates", "out_of_order"), 7
    )
    return {
        "cluster": "pb",
        "topic": "nines.probe",
        "partitions": {
            0: {**stats, "send_errors": {"timeout": 2}},
            1: {**stats, "send_errors": {}},
        },
        "leaders": {0: 1, 1: 2},
        "in_flight": 3,
        "echo_dropped": 0,
        "arrivals_dropped": 0,
        "echo_buffered": 1,
        "hiccup_max_us": 2_500,
        "brokers": 2,
        "brokers_unprobed": 0,
        "partitions_unprobed": 1,
        "topic_exists": 1,
        "metadata_age_s": 1.5,
        "admin_errors": {("create_topic", "TOPIC_AUTHORIZATION_FAILED"): 1},
    }


def test_prometheus_reads_every_sample_and_the_native_histogram(
    tmp_path: Path, prometheus_release: PrometheusRelease
) -> None:
    windows = stall_windows()
    exp = LatencyExporter()
    exp.update(with_rollups(windows))
    exp.set_pipeline_health(0.5, 1000.0, 3.0, 42, 1_800_000_000.0)
    stream = exp.serve("127.0.0.1", 0)
    probe = serve(probe_snapshot, "127.0.0.1", 0)
    prom = Prometheus(
        tmp_path,
        {"stream": f"127.0.0.1:{stream.port}", "probe": f"127.0.0.1:{probe.port}"},
        [],
        None,
        native_histograms=True,
        binary=prometheus_release.server,
    )
    try:
        wait_until(lambda: prom.query(NATIVE), 30, 0.5, "the native histogram in Prometheus")
        time.sleep(1.5)  # both targets scraped at least once
        ups = {r["metric"]["job"]: r["value"][1] for r in prom.query("up")}
        assert ups == {"stream": "1", "probe": "1"}, (ups, prom.log.read_text()[-2000:])
        # Prometheus asked both for protobuf (and gzip): that is the body it read
        assert (
            promproto.CONTENT_TYPE in stream._gzipped and promproto.CONTENT_TYPE in probe._gzipped
        )

        # every sample of the text format, read by Prometheus from the protobuf body; the native
        # family is a histogram sample there (its text form is only +Inf, count and sum)
        stream_text = {
            k: v
            for k, v in text_samples(text_body(exp)).items()
            if NATIVE not in dict(k)["__name__"]
        }
        assert prometheus_samples(prom, "stream") == stream_text

        # the probe's own CPU and cgroup counters are read at each scrape: they move between two
        # scrapes; every other sample is the snapshot's
        def steady(samples: dict) -> dict:  # type: ignore[type-arg]
            return {k: v for k, v in samples.items() if not VOLATILE.match(dict(k)["__name__"])}

        probe_text = text_samples(serve_text(probe.port))
        assert steady(prometheus_samples(prom, "probe")) == steady(probe_text)
        assert {dict(k)["__name__"] for k in prometheus_samples(prom, "probe")} == {
            dict(k)["__name__"] for k in probe_text
        }

        (native,) = [r for r in prom.query(f'{NATIVE}{{kind="e2e"}}')]
        h = native["histogram"][1]
        merged = windows[0].hist
        for w in windows[1:]:
            merged = merged.merge(w.hist)
        assert int(h["count"]) == merged.total
        assert float(h["sum"]) == merged.sum_us / 1e6
        assert len(h["buckets"]) > 20  # sparse buckets, not one classic +Inf
        (schema,) = {
            m["histogram"]["schema"]
            for f in families(protobuf_body(exp))
            if f["name"] == NATIVE
            for m in f["metric"]
        }
        for q in (0.5, 0.99, 0.999):
            (r,) = prom.query(f'histogram_quantile({q}, {NATIVE}{{kind="e2e"}})')
            got, hdr = float(r["value"][1]), merged.value_at_quantile(q) / 1e6
            assert abs(got - hdr) <= bucket_width(schema) * hdr, (q, got, hdr, schema)
        # the classic family stays classic beside it: the burn-rate rules' buckets
        le = prom.query('nines_latency_classic_seconds_bucket{kind="e2e", le="0.05"}')
        assert float(le[0]["value"][1]) == merged.count_at_or_below(50_000)
    finally:
        prom.close()
        stream.close()
        probe.close()


def serve_text(port: int) -> bytes:
    import urllib.request

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        return bytes(r.read())
