"""Native histograms through a CTRL+Z, on a real Prometheus: probe → broker → stream job →
Debian's Prometheus 2.42 with ``--enable-feature=native-histograms``.

The native histogram counts each 10 s window when it closes (a watermark after its end). So the
test reads, from Prometheus, the native series' first and last samples of the run; each must
be the sum of a prefix of the archived windows in window order (every window counted once, when
it closed). ``histogram_quantile(0.999, sum(increase(native[span])))`` over those samples then
agrees with nines' own merged HDR quantile of the windows between them, read from the archive,
within the schema's bucket width. And over 7 minutes, a window nines never closed, the stall's
tail is there at query time.
"""

from __future__ import annotations

import math
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from e2e_servers import Process, Prometheus, free_port, http_json, require_prometheus, wait_until
from test_alerting_e2e import archived_e2e_max_s, nines

from core import promproto
from core.hdr import SparseHistogram
from monitor.exporter.contract import NATIVE
from monitor.exporter.native import bucket_width
from testbroker import EmbeddedBroker
from testkit.archive import read_windows
from testkit.promproto_decode import families

pytestmark = pytest.mark.slow

STALL_S = 6.0
E2E = f'{NATIVE}{{kind="e2e"}}'


def query_at(prom: Prometheus, expr: str, at_s: float) -> list[dict[str, Any]]:
    url = prom.url + "/api/v1/query?" + urllib.parse.urlencode({"query": expr, "time": at_s})
    data = http_json(url)
    assert data["status"] == "success", (expr, data)
    return list(data["data"]["result"])


def native_schema(port: int) -> int:
    """The e2e native series' schema, as the stream's /metrics serves it now (the coarsest yet:
    a series' schema only ever gets coarser)."""
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/metrics", headers={"Accept": promproto.CONTENT_TYPE}
    )
    with urllib.request.urlopen(request, timeout=30) as r:
        body = r.read()
    (schema,) = {
        m["histogram"]["schema"]
        for f in families(body)
        if f["name"] == NATIVE
        for m in f["metric"]
        if {"name": "kind", "value": "e2e"} in m["label"]
    }
    return int(schema)


def archive_prefixes(archive: Path) -> tuple[list[int], list[list[SparseHistogram]]]:
    """The archived e2e 10 s windows grouped by window end, in order: each group's histograms,
    and the running sample count after each group (0 first)."""
    groups: dict[int, list[SparseHistogram]] = {}
    for w in read_windows(archive, "10s"):
        if w.series.kind == "e2e":
            groups.setdefault(w.window_end_us, []).append(w.hist)
    ordered = [groups[end] for end in sorted(groups)]
    totals = [0]
    for g in ordered:
        totals.append(totals[-1] + sum(h.total for h in g))
    return totals, ordered


def check_native_panels(prom: Prometheus) -> None:
    """The dashboards' native-histogram panels return data from this Prometheus."""
    import dashboards

    variables = {"cluster": "e2e", "topic": "nines.probe", "__range": "5m"}
    exprs = [
        dashboards.substitute(expr, variables)
        for dash in dashboards.build_all().values()
        for expr in dashboards.queries(dash)
        if NATIVE in expr
    ]
    assert len(exprs) >= 2
    empty = [e for e in exprs if not prom.query(e)]
    assert not empty, empty


def test_native_histogram_through_a_ctrl_z(tmp_path: Path) -> None:
    require_prometheus()
    stream_port, probe_port = free_port(), free_port()
    archive = tmp_path / "archive"
    with EmbeddedBroker() as broker:
        probe = Process(
            nines("probe", "--bootstrap", broker.bootstrap, "--rate", "100", "--cluster", "e2e",
                  "--loss-timeout", "30s", "--metrics-port", str(probe_port)),
            tmp_path / "probe.log",
        )  # fmt: skip
        stream = Process(
            nines("stream", "--bootstrap", broker.bootstrap, "--windows", "10s,1m",
                  "--watermark", "10s", "--trigger", "1s", "--metrics-port", str(stream_port),
                  "--starting-offsets", "earliest", "--checkpoint", str(tmp_path / "ckpt"),
                  "--archive", str(archive), "--master", "local[2]"),
            tmp_path / "stream.log",
        )  # fmt: skip
        prom = Prometheus(
            tmp_path,
            {"nines-stream": f"127.0.0.1:{stream_port}", "nines-probe": f"127.0.0.1:{probe_port}"},
            [],
            None,
            native_histograms=True,
        )
        try:
            started = time.monotonic()
            wait_until(lambda: prom.query(E2E), 240, 2, "the first native histogram")
            print(f"\nfirst native histogram after {time.monotonic() - started:.0f} s")
            time.sleep(5)
            broker.pause()
            time.sleep(STALL_S)
            broker.resume()
            wait_until(
                lambda: archived_e2e_max_s(archive) >= STALL_S * 0.8,
                120,
                1,
                f"an archived 10s window holding the {STALL_S:g} s stall",
            )
            stall_end = max(
                w.window_end_us
                for w in read_windows(archive, "10s")
                if w.series.kind == "e2e" and w.hist.max_us >= STALL_S * 0.8e6
            )
            # one more window closed after the stall's, and Prometheus has scraped it
            wait_until(
                lambda: max(w.window_end_us for w in read_windows(archive, "10s")) > stall_end,
                60,
                1,
                "a window after the stall's",
            )

            def settled() -> list[dict[str, Any]]:
                totals = archive_prefixes(archive)[0]
                now = prom.query(E2E)
                return (
                    now if now and int(float(now[0]["histogram"][1]["count"])) == totals[-1] else []
                )

            wait_until(settled, 60, 0.5, "Prometheus' native count equal to the archive's")
            at_s = time.time()
            # the native series' samples over the run: the first and the last
            (series,) = query_at(prom, f"{E2E}[10m]", at_s)
            samples = series["histograms"]
            (t_first, first), last = samples[0], samples[-1][1]
            c_first, c_last = int(float(first["count"])), int(float(last["count"]))
            totals, groups = archive_prefixes(archive)
            # every scrape's count is a sum of whole windows, in window order
            assert c_first in totals and c_last in totals, (c_first, c_last, totals)
            between = [h for g in groups[totals.index(c_first) : totals.index(c_last)] for h in g]
            merged = between[0]
            for h in between[1:]:
                merged = merged.merge(h)
            assert merged.max_us >= STALL_S * 0.8e6  # the span holds the stall
            hdr_s = merged.value_at_quantile(0.999) / 1e6
            span_s = at_s - float(t_first) + 0.5  # the first sample, not the one before it
            (r,) = query_at(
                prom,
                f"histogram_quantile(0.999, sum(increase({E2E}[{int(span_s * 1000)}ms])))",
                at_s,
            )
            native_s = float(r["value"][1])
            schema = native_schema(stream_port)
            error = abs(native_s / hdr_s - 1)
            print(
                f"\np99.9 of {len(groups[totals.index(c_first) : totals.index(c_last)])} closed "
                f"windows ({c_last - c_first} samples): native {native_s:.4f} s, HDR {hdr_s:.4f} "
                f"s, error {error:.3%}, schema {schema} (bucket width {bucket_width(schema):.3%})"
            )
            assert error <= bucket_width(schema), (native_s, hdr_s, schema)

            # a window nines never closed: 7 minutes, at query time
            (tail,) = query_at(prom, f"histogram_quantile(0.999, sum(increase({E2E}[7m])))", at_s)
            (classic,) = query_at(
                prom,
                "histogram_quantile(0.999, sum by (le) "
                '(increase(nines_latency_classic_seconds_bucket{kind="e2e"}[7m])))',
                at_s,
            )
            (fast,) = query_at(prom, f"histogram_fraction(0, 1, sum(increase({E2E}[7m])))", at_s)
            print(
                f"over 7m: native p99.9 {float(tail['value'][1]):.3f} s, classic p99.9 "
                f"{float(classic['value'][1]):.3f} s, fraction under 1 s "
                f"{float(fast['value'][1]):.4f}"
            )
            assert STALL_S * 0.8 <= float(tail["value"][1]) <= STALL_S + 5
            assert 0.5 < float(fast["value"][1]) < 1.0  # the stall's messages were slower
            # the burn-rate SLI read from either histogram: the share under 50 ms agrees (the
            # native one interpolates inside the one bucket that holds 50 ms)
            (classic_sli,) = query_at(
                prom,
                'sum(increase(nines_latency_classic_seconds_bucket{kind="e2e", le="0.05"}[7m])) / '
                'sum(increase(nines_latency_classic_seconds_count{kind="e2e"}[7m]))',
                at_s,
            )
            (native_sli,) = query_at(
                prom, f"histogram_fraction(0, 0.05, sum(increase({E2E}[7m])))", at_s
            )
            # They can differ by at most the share of the samples in the native bucket that
            # holds 50 ms, measured in this run at its exact bounds (the fixed 0.01 failed at
            # 0.0118 in two CI-like runs at load 6-9, whose floor reached toward 50 ms).
            base = 2 ** (2.0**-schema)
            upper = base ** math.ceil(math.log(0.05, base))
            (straddled,) = query_at(
                prom,
                f"histogram_fraction({upper / base!r}, {upper!r}, sum(increase({E2E}[7m])))",
                at_s,
            )
            sli_gap = abs(float(native_sli["value"][1]) - float(classic_sli["value"][1]))
            print(f"50 ms SLI: native - classic {sli_gap:.4f}, share {straddled['value'][1]}")
            assert sli_gap <= float(straddled["value"][1]) + 0.002, (sli_gap, straddled)
            check_native_panels(prom)
        finally:
            for proc in (prom, stream, probe):
                proc.close()
