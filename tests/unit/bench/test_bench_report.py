"""The report is generated from result JSON only, and says plainly what was not measured."""

from __future__ import annotations

from pathlib import Path

from bench.report import render
from bench.report_format import fmt_error, fmt_seconds
from bench.report_health import health_section
from bench.report_probe import headline_soak, probe_section, soak_section, summarise_probe

FIXTURE = {
    "accuracy": {
        "machine": {"cores": 2, "python": "3.11.7", "timestamp": "2026-01-01T00:00:00Z"},
        "quick": True,
        "seed": 1,
        "quantiles": ["0.99", "0.9999", "1.0"],
        "datasets": [
            {
                "name": "toy",
                "description": "a toy trace",
                "samples": 1000,
                "windows": 2,
                "window_s": 10.0,
                "exact_s": {"0.99": 0.01, "0.9999": 0.5, "1.0": 2.0},
                "methods": {
                    "nines": {
                        "label": "nines: merged",
                        "value_s": {"0.99": 0.01, "0.9999": 0.5004, "1.0": 2.0},
                        "rel_error": {"0.99": 0.0, "0.9999": 0.0008, "1.0": 0.0},
                    },
                    "prom_classic": {
                        "label": "Prometheus classic",
                        "value_s": {"0.99": 0.025, "0.9999": 1.0, "1.0": 10.0},
                        "rel_error": {"0.99": 1.5, "0.9999": 1.0, "1.0": 4.0},
                    },
                },
            }
        ],
    },
    "run": {
        "machine": {"cores": 2},
        "argv": ["python", "-m", "bench.run", "--quick"],
        "wall_s": 12.0,
        "parts": {
            "accuracy": {"status": "ok", "wall_s": 1.0},
            "co": {"status": "skipped", "reason": "probes.ProbeAgent has not landed yet"},
        },
    },
}


def test_table_rows_come_from_the_json(tmp_path: Path) -> None:
    doc = tmp_path / "benchmarks.md"
    text = render(FIXTURE, img_dir=tmp_path / "img", doc_path=doc)
    assert doc.read_text() == text
    assert "| method | p99 | p99.99 | max |" in text
    assert "| **exact** | 10 ms | 500 ms | 2 s |" in text
    assert "| nines: merged | 10 ms (0 %) | 500 ms (+0.080 %) | 2 s (0 %) |" in text
    assert "| Prometheus classic | 25 ms (+150 %) | 1 s (+100 %) | 10 s (+400 %) |" in text
    assert (tmp_path / "img" / "accuracy.png").stat().st_size > 1000


def test_missing_parts_are_named_with_their_reason(tmp_path: Path) -> None:
    text = render(FIXTURE, img_dir=tmp_path / "img", doc_path=tmp_path / "b.md")
    assert "not measured in this run (probes.ProbeAgent has not landed yet)" in text
    assert "Probe send lag / CPU: not measured (no result file)" in text


def test_formatting() -> None:
    assert fmt_seconds(0.0005) == "500 µs"
    assert fmt_seconds(4.4011) == "4.401 s"
    assert fmt_seconds("inf") == "inf"
    assert fmt_error(-0.98) == "-98 %"
    assert fmt_error(0.00005) == "+0.005 %"


HEALTH = {
    "quick": True,
    "freshness": {
        "trigger_s": 1.0,
        "watermark_s": 2.0,
        "rate_per_s": 200,
        "windows": [
            {
                "window_end": 1_700_000_010.0,
                "delay_s": 2.459,
                "delay_triggers": 2.46,
                "batches_started_after_pass": 2,
                "emitting_batch_s": 0.491,
                "bound_s": 2.791,
            },
            {"window_end": 1_700_000_020.0, "missing": True},
        ],
        "max_delay_s": 2.459,
        "max_delay_triggers": 2.46,
        "batch_s_median": 0.558,
    },
    "memory": {
        "series": 10200,
        "layout": "100 clusters x 1 topic x 34 partitions x 3 kinds",
        "echoes": 40801,
        "event_time_span_s": 60,
        "resolutions": ["10s", "1m", "1h"],
        "watermark_s": 120.0,
        "process_s": 40.5,
        "rss": {
            "driver_python": {"peak_rss_mib": 491.4, "end_rss_mib": 397.6, "max_processes": 1},
            "jvm": {"peak_rss_mib": 1050.6, "end_rss_mib": 1049.7, "peak_pss_mib": 1046.8},
            "total": {"peak_rss_mib": 2291.2, "end_rss_mib": 2197.0},
        },
        "state": {"rows_peak": 271796, "memory_used_bytes_peak": 155_946_304},
        "exported_series": {"10s": 10200, "1m": 10200},
        "metrics_bytes": 42_442_987,
        "metrics_scrape_s": 4.77,
    },
}


def test_health_section_tables_come_from_the_json(tmp_path: Path) -> None:
    text = health_section(HEALTH)
    assert text.startswith("## Stream freshness and memory")
    assert "| 22:13:30 | 2.459 s | 2.46 | 2 | 491 ms | 2.791 s |" in text
    assert "| 22:13:40 | **never shown** |" in text
    assert "| **max** | **2.459 s** | **2.46** |  | median 558 ms |  |" in text
    assert "| driver (Python) (1) | 491 | 398 | 0 | 0 |" in text
    assert "| JVM (driver + executors) | 1,051 | 1,050 | 1,047 | 0 |" in text
    assert "| **total** | 2,291 | 2,197 |" in text
    assert "271,796 rows at peak (149 MiB)" in text and "10,200 (10s), 10,200 (1m)" in text
    assert "42.4 MB in 4.77 s" in text
    doc = render({**FIXTURE, "stream_health": HEALTH}, tmp_path / "img", tmp_path / "b.md")
    assert "- **Stream health**: a closed 10 s window is on /metrics at most **2.46 s**" in doc
    assert "**2,291 MiB** peak RSS" in doc and "| **total** | 2,291 |" in doc
    missing = render(FIXTURE, tmp_path / "img", tmp_path / "c.md")
    assert (
        "## Stream freshness and memory\n\n_Not measured in this run: no result file._" in missing
    )


def _rate(rate: int, lag: list[int], e2e: list[int], cpu: float, **kw: object) -> dict:
    return {
        "rate_total_per_s": rate,
        "partitions": 3,
        "size_bytes": 1024,
        "duration_s": 50.0,
        "messages": rate * 50,
        "expected": rate * 50,
        "missing": 0,
        "lost": 0,
        "duplicates": 0,
        "send_lag_us": dict(zip(("p50", "p99", "p999", "max"), lag, strict=True)),
        "e2e_us": dict(zip(("p50", "p99", "p999", "max"), e2e, strict=True)),
        "publish_us": {"p50": 900, "p99": 2000, "p999": 3000, "max": 4000},
        "cpu_pct_of_core": cpu,
        "broker_cpu_pct_of_core": 9.5,
        "hiccup_max_us": 2500,
        "control_oversleep_us": {
            "samples": 50000,
            "p50": 80,
            "p99": 300,
            "p999": 1200,
            "max": 3000,
        },
        "rss_mib_start": 60.0,
        "rss_mib_end": 61.5,
        "rss_mib_max": 62.0,
        "rss_slope_mib_per_min": 0.012,
        "load_avg_1m_at_end": 1.5,
        **kw,
    }


PROBE = {
    "rates": {
        "1000": _rate(1000, [110, 600, 950, 4200], [1500, 3000, 8000, 12000], 12.25),
        "10000": _rate(10000, [300, 2500, 9000, 15000], [2000, 9000, 30000, 41000], 71.0, lost=2),
    },
    "targets": {"rate": 1000, "send_lag_p999_us": 1000, "cpu_pct_of_core": 15.0},
    "met": {"send_lag_p999": True, "cpu": True, "all": True},
    "quick": False,
    "machine": {"cpus": 2, "python": "3.11.7", "load_avg_1m_at_end": 1.5},
}


def test_probe_section_one_row_per_rate(tmp_path: Path) -> None:
    text = probe_section(PROBE)
    assert "| rate (msgs/s) | messages | send lag p50 | p99 | p99.9 | max |" in text
    assert (
        "| 1,000 | 50,000 | 110 µs | 600 µs | 950 µs | 4.2 ms | 1.5 ms | 8 ms | 12 ms "
        "| 12.2 % | +0.01 MiB/min | yes |"
    ) in text
    assert "| 10,000 | 500,000 (**2 lost**) | 300 µs |" in text
    assert "| 71.0 % | +0.01 MiB/min | no target |" in text
    assert (
        "| 1,000 | 50.0 s | 900 µs / 3 ms | 2.5 ms | 1.2 ms / 3 ms | 9.5 % "
        "| 60.0 → 61.5 (max 62.0) | 1.5 |"
    ) in text
    without_control = {**PROBE, "rates": {"1000": {**PROBE["rates"]["1000"]}}}
    del without_control["rates"]["1000"]["control_oversleep_us"]
    assert "| 2.5 ms | n/a | 9.5 % |" in probe_section(without_control)
    assert "— **met**." in text
    slow = {**PROBE, "rates": {**PROBE["rates"]}, "met": {"all": False}}
    slow["rates"]["1000"] = _rate(1000, [110, 600, 2300, 5000], [1, 2, 3, 4], 18.0)
    assert "| **no** (p99.9 > 1 ms; CPU > 15.0 %) |" in probe_section(slow)
    assert "reset past deleted offsets" not in text
    slow["rates"]["10000"] = _rate(
        10000, [1, 2, 3, 4], [1, 2, 3, 4], 80.0, consumer_offset_resets=3
    )
    assert "At 10,000 msgs/s the probe's consumer fell further behind" in probe_section(slow)
    slow["rates"]["10000"] = {"rate_total_per_s": 10000, "error": "RuntimeError: boom"}
    assert "| 10,000 | **failed**: RuntimeError: boom | n/a |" in probe_section(slow)
    line = summarise_probe(PROBE)
    assert "at 1,000 msgs/s send lag p99.9 **950 µs**, CPU **12.2 %** of a core" in line
    assert "(targets ≤ 1 ms, ≤ 15.0 %: **met**)" in line
    assert "end-to-end floor on the embedded broker p50 1.5 ms, p99.9 8 ms" in line
    doc = render({**FIXTURE, "probe": PROBE}, tmp_path / "img", tmp_path / "p.md")
    assert "## Probe: send lag and CPU\n\nFrom `bench/results/probe.json`" in doc
    assert "- **Probe**: at 1,000 msgs/s" in doc
    assert "`rates.1000" not in doc  # the probe no longer falls back to the generic table


SOAK = {
    "complete": True,
    "rate_total_per_s": 1000.0,
    "size_bytes": 1024,
    "elapsed_s": 7230.0,
    "echoes": 7_200_000,
    "expected": 7_200_000,
    "missing": 0,
    "duplicates": 0,
    "lost": 3,
    "bad_records": {},
    "probe_exit_code": 0,
    "rss_mib_first": 62.5,
    "rss_mib_last": 63.0,
    "rss_mib_max": 63.4,
    "rss_slope_mib_per_hour_second_half": 0.04,
    "intervals": [
        {
            "t_min": 5.0,
            "echoes": 300_000,
            "lost": 3,
            "send_lag_us": {"p50": 110, "p99": 400, "p999": 1500, "max": 6000},
            "e2e_us": {"p50": 6000, "p99": 12000, "p999": 13000, "max": 40000},
            "hiccup_max_us": 3000,
            "cpu_pct_of_core": 18.5,
            "rss_mib": 62.5,
            "load_avg_1m": 0.7,
        },
        {
            "t_min": 120.5,
            "echoes": 10,
            "lost": 0,
            "send_lag_us": None,
            "e2e_us": None,
            "hiccup_max_us": 0,
            "cpu_pct_of_core": None,
            "rss_mib": None,
            "load_avg_1m": 0.2,
        },
    ],
}


def test_soak_section_and_headline_come_from_the_json(tmp_path: Path) -> None:
    text = soak_section(SOAK)
    assert "for 2.01 h" in text
    assert (
        "7,200,000 echoes for 7,200,000 messages sent, **0 missing**, 0 duplicated, 3 lost" in text
    )
    assert "slope over the second half **0.04 MiB/h**" in text
    assert (
        "| 5 | 300,000 | 3 | 1.5 ms | 6 ms | 6 ms | 13 ms | 40 ms | 3 ms | 18.5 % | 62.5 | 0.7 |"
        in text
    )
    assert "| 120 | 10 | 0 | n/a | n/a | n/a | n/a | n/a | 0 µs | n/a | n/a | 0.2 |" in text
    assert "interrupted" not in text
    line = headline_soak({"soak": SOAK})
    assert line.startswith("- **Probe soak**: 2.01 h at 1,000 msgs/s, 7,200,000 echoes, 0 missing")
    partial = {**SOAK, "complete": False, "missing": None, "expected": None}
    assert "**interrupted**: partial" in headline_soak({"soak": partial})
    assert "echoes for n/a messages sent" in soak_section(partial)
    assert headline_soak({}) == "- Probe soak: not run (`make soak`, hours)."
    doc = render({**FIXTURE, "soak": SOAK}, tmp_path / "img", tmp_path / "s.md")
    assert "## Probe soak: hours against the embedded broker" in doc


def test_compare_section_is_the_four_system_table_from_the_json(tmp_path: Path) -> None:
    row = {"samples": 89_990, "lost": 2, "max_s": 0.5, "p50": 0.001, "p90": 0.002, "p99": 0.004,
           "p99.9": 0.008, "p99.99": 0.016, "p99.999": None, "p99.9999": None,
           "late": 5, "probe": {"sent": 90_000, "unresolved": 7, "echo_dropped": 3}}  # fmt: skip
    compare = {
        "duration_s": 30.0,
        "caveats": ["same host", "a test broker for Kafka"],
        "cases": [
            {"key": "256B-3000", "label": "256 B at 3,000 msgs/s", "plot": "compare-256B-3000.png",
             "expected": 90_000,
             "systems": {s: row for s in ("kafka", "nats", "redis", "rabbitmq")}}
        ],
    }  # fmt: skip
    text = render({**FIXTURE, "compare": compare}, tmp_path / "img", tmp_path / "b.md")
    assert "## Four brokers side by side (`nines compare`)" in text
    assert "Caveats: same host; a test broker for Kafka." in text
    assert "**256 B at 3,000 msgs/s**" in text
    for system in ("kafka", "nats", "redis", "rabbitmq"):
        assert (
            f"| {system} | 90,000 | 89,990 | 2 | 5 | 7 | 3 | 1.000 | 2.000 | 4.000 | 8.000 "
            "| 16.000 | — | — | 500.000 |" in text
        )
    assert "Latencies in milliseconds" in text
    bare = render(FIXTURE, tmp_path / "img", tmp_path / "c.md")
    assert "Four brokers side by side" in bare and "_Not measured in this run" in bare


def test_the_scrape_budget_holds_for_both_formats_or_is_not_met() -> None:
    from bench.report_scrape import headline_scrape, scrape_section

    text_only = {"series": 10_000, "windows": 90_180, "topics": 20, "rate_per_s": 100,
                 "scrapes": 5, "kind_series": 30_060, "bytes_per_kind_series": 2_200,
                 "scrape_gzip_mb": 4.0, "scrape_gzip_cpu_s": 0.3, "scrape_gzip_s": 0.4,
                 "scrape_plain_mb": 67.0, "scrape_plain_cpu_s": 0.2, "scrape_plain_s": 0.3,
                 "render_cpu_s": 0.7, "memory_mib": 100.0}  # fmt: skip
    assert "**met**" in headline_scrape({"cardinality": text_only})
    pb = {**text_only, "body_pb_mb": 61.0, "scrape_pb_gzip_mb": 5.2, "scrape_pb_gzip_cpu_s": 0.3,
          "scrape_pb_gzip_s": 0.4, "scrape_pb_all_changed_cpu_s": 0.6,
          "families_pb": {"nines_latency_seconds": {"raw": 40_000_000, "gzip": 3_300_000}},
          }  # fmt: skip
    line = headline_scrape({"cardinality": pb})
    assert "protobuf (native histograms on) **5.20 MB**" in line and "**not met**" in line
    section = scrape_section(pb, None)
    assert "| now | 61.0 MB | 5.20 MB | 0.30 s (0.40 s) |  |  | 0.60 s |  |" in section
    assert "| `nines_latency_seconds` | 40.00 MB | 3.300 MB |" in section
    assert "updates before these scrapes" not in section  # not measured: not claimed
    updates = {"update_10s_cpu_s": 0.3, "update_minute_cpu_s": 0.5, "update_all_cpu_s": 0.8,
               "pb_total_cpu_s": 0.6, "gzip_total_cpu_s": 0.5, "pb_minute_total_cpu_s": 0.9,
               "minute_total_cpu_s": 0.8, "pb_all_changed_total_cpu_s": 1.4,
               "all_changed_total_cpu_s": 1.3}  # fmt: skip
    section = scrape_section({**pb, **updates}, None)
    assert "The updates cost 0.30 s of CPU for a batch of 10 s windows, 0.50 s" in section
    assert "after a minute 0.90 s in protobuf and 0.80 s in text" in section
