"""docs/benchmarks.md's stream freshness and memory section."""

from __future__ import annotations

import time
from collections.abc import Mapping

from bench.report_format import Json, at_path, fmt_seconds, skip_reason, table

# --- stream freshness and memory -------------------------------------------------------------

HEALTH_TITLE = "## Stream freshness and memory"


def headline_health(results: dict[str, Json]) -> str:
    """One line: worst freshness delay and total peak RSS, from stream_health.json."""
    data = results.get("stream_health")
    fresh, mem = at_path(data, "freshness"), at_path(data, "memory")
    if not isinstance(fresh, Mapping) and not isinstance(mem, Mapping):
        return f"- Stream freshness / memory: not measured ({skip_reason(results, 'health')})."
    parts = []
    if isinstance(fresh, Mapping) and fresh.get("max_delay_s") is not None:
        parts.append(
            f"a closed 10 s window is on /metrics at most **{fresh['max_delay_s']:.2f} s** "
            f"({fresh.get('max_delay_triggers', '?')} triggers of {fresh.get('trigger_s', '?')} s) "
            f"after the watermark passed its end ({len(fresh.get('windows', []))} windows)"
        )
    peak = at_path(mem, "rss", "total", "peak_rss_mib")
    if peak is not None:
        parts.append(
            f"**{peak:,.0f} MiB** peak RSS (driver + JVM + Python workers) with "
            f"{at_path(mem, 'series') or 0:,} series"
        )
    return "- **Stream health**: " + "; ".join(parts or ["see its section"]) + "."


def health_section(data: Json) -> str:
    """Freshness delays per window and memory per process class, from stream_health.json."""
    quick = ", **quick mode**" if data.get("quick") else ""
    out = [
        f"{HEALTH_TITLE}\n",
        "From `bench/results/stream_health.json` (written by "
        f"`tests/bench/test_stream_freshness_bench.py`{quick}).\n",
    ]
    fresh = data.get("freshness")
    if isinstance(fresh, Mapping):
        out.append(
            f"**Freshness**: a live producer writes {fresh.get('rate_per_s', '?')} echoes/s "
            f"(event time = now); trigger {fresh.get('trigger_s', '?')} s, watermark "
            f"{fresh.get('watermark_s', '?')} s. Delay from the watermark passing a 10 s window's "
            "end (the first echo at or past end + watermark was produced) to the window on "
            "/metrics (polled every 50 ms); the target is 2 triggers (one batch advances the "
            "watermark, the next emits) plus the emitting batch's duration.\n"
        )
        rows = []
        for w in fresh.get("windows", []):
            end = w.get("window_end")
            when = time.strftime("%H:%M:%S", time.gmtime(end)) if end else "?"
            if w.get("missing"):
                rows.append([when, "**never shown**", "", "", "", ""])
                continue
            rows.append(
                [
                    when,
                    fmt_seconds(w.get("delay_s")),
                    w.get("delay_triggers", "?"),
                    w.get("batches_started_after_pass", "?"),
                    fmt_seconds(w.get("emitting_batch_s")),
                    fmt_seconds(w.get("bound_s")),
                ]
            )
        rows.append(
            [
                "**max**",
                f"**{fmt_seconds(fresh.get('max_delay_s'))}**",
                f"**{fresh.get('max_delay_triggers', '?')}**",
                "",
                f"median {fmt_seconds(fresh.get('batch_s_median'))}",
                "",
            ]
        )
        header = ["window end (UTC)", "delay", "triggers", "batches", "emitting batch", "bound"]
        out.append(table(header, rows) + "\n")
    mem = data.get("memory")
    if isinstance(mem, Mapping):
        rss = mem.get("rss", {})
        out.append(
            f"**Memory**: {mem.get('series', 0):,} series ({mem.get('layout', '?')}), "
            f"{mem.get('echoes', 0):,} echoes over {mem.get('event_time_span_s', '?')} s of event "
            f"time, resolutions {', '.join(mem.get('resolutions', []))}, watermark "
            f"{mem.get('watermark_s', '?')} s; sampled every 0.5 s while the job processed them "
            f"({mem.get('process_s', '?')} s). PSS splits the pages forked workers share.\n"
        )
        rows = []
        labels = (
            ("driver_python", "driver (Python)"),
            ("jvm", "JVM (driver + executors)"),
            ("python_workers", "Python workers"),
            ("total", "**total**"),
        )
        for key, label in labels:
            r = rss.get(key)
            if not isinstance(r, Mapping):
                continue
            n = f" ({r['max_processes']})" if "max_processes" in r else ""
            rows.append(
                [
                    label + n,
                    *[f"{r.get(k, 0):,.0f}" for k in ("peak_rss_mib", "end_rss_mib")],
                    *[f"{r.get(k, 0):,.0f}" for k in ("peak_pss_mib", "end_pss_mib")],
                ]
            )
        header = ["process", "peak RSS MiB", "end RSS MiB", "peak PSS MiB", "end PSS MiB"]
        out.append(table(header, rows) + "\n")
        state = mem.get("state", {})
        exported = mem.get("exported_series", {})
        out.append(
            f"Spark state: {state.get('rows_peak', 0):,} rows at peak "
            f"({state.get('memory_used_bytes_peak', 0) / 2**20:,.0f} MiB), "
            f"{state.get('rows_end', 0):,} at the end "
            f"({state.get('memory_used_bytes_end', 0) / 2**20:,.0f} MiB). Series exported: "
            + ", ".join(f"{n:,} ({res})" for res, n in exported.items())
            + f". One /metrics scrape: {mem.get('metrics_bytes', 0) / 1e6:.1f} MB in "
            f"{fmt_seconds(mem.get('metrics_scrape_s'))}.\n"
        )
    return "\n".join(out)
