"""docs/benchmarks.md's scrape-cost section: bytes and CPU of /metrics at the series cap."""

from __future__ import annotations

from collections.abc import Mapping

from bench.report_format import Json, table

# --- scrape cost ------------------------------------------------------------------------------

SCRAPE_TITLE = "## Scrape cost at the series cap"
#: The scrape budget at 10,000 probe partitions (issue 16): bytes on the wire and seconds.
SCRAPE_TARGET_MB, SCRAPE_TARGET_S = 5.0, 0.5


def headline_scrape(results: dict[str, Json]) -> str:
    """One line: bytes on the wire and scrape time at the measured series count."""
    data = results.get("cardinality")
    if not isinstance(data, Mapping) or not data.get("series"):
        return "- Scrape cost: not measured (`python -m bench.cardinality --save`)."
    mb, cpu, wall = data["scrape_gzip_mb"], data["scrape_gzip_cpu_s"], data["scrape_gzip_s"]
    met = mb <= SCRAPE_TARGET_MB and cpu <= SCRAPE_TARGET_S
    line = (
        f"- **Scrape** at {data['series']:,} probe partitions ({data['windows']:,} windows): "
        f"**{mb:.2f} MB** gzipped ({data['scrape_plain_mb']:.1f} MB of text), **{cpu:.2f} s** "
        f"of CPU ({wall:.2f} s wall)"
    )
    if "scrape_pb_gzip_mb" in data:
        pb_mb, pb_cpu = data["scrape_pb_gzip_mb"], data["scrape_pb_gzip_cpu_s"]
        met = met and pb_mb <= SCRAPE_TARGET_MB and pb_cpu <= SCRAPE_TARGET_S
        line += (
            f"; protobuf (native histograms on) **{pb_mb:.2f} MB** ({data['body_pb_mb']:.1f} MB "
            f"raw), **{pb_cpu:.2f} s**"
        )
    return (
        f"{line}; targets ≤ {SCRAPE_TARGET_MB:g} MB, ≤ {SCRAPE_TARGET_S:g} s: "
        f"**{'met' if met else 'not met'}**."
    )


def _scrape_updates(r: Json) -> str:
    """The windows' updates before the scrapes, and each kind of scrape with its update."""
    keys = ("update_10s_cpu_s", "update_minute_cpu_s", "update_all_cpu_s")
    if not all(k in r for k in keys):
        return ""
    totals = ", ".join(
        f"{label} {r[pb]:.2f} s in protobuf and {r[text]:.2f} s in text"
        for label, pb, text in (
            ("after a batch", "pb_total_cpu_s", "gzip_total_cpu_s"),
            ("after a minute", "pb_minute_total_cpu_s", "minute_total_cpu_s"),
            ("after all", "pb_all_changed_total_cpu_s", "all_changed_total_cpu_s"),
        )
    )
    worker = (
        " (of which the pre-render worker, both formats: "
        f"{r['prerender_minute_cpu_s']:.2f} s and {r['prerender_all_cpu_s']:.2f} s)"
        if "prerender_all_cpu_s" in r
        else ""
    )
    return (
        "\n\nThe windows' updates before these scrapes are not in them: the exporter keeps a "
        "closed window's numbers; a scrape encodes the finest resolution's windows, and a "
        "worker thread encodes and deflates the coarser ones (1 m, 1 h) when they arrive, for "
        "the formats scraped lately, so the hourly scrape costs what the others do. The "
        f"updates cost {r['update_10s_cpu_s']:.2f} s of CPU for a "
        f"batch of 10 s windows, {r['update_minute_cpu_s']:.2f} s for the 10 s and 1 m windows "
        f"and {r['update_all_cpu_s']:.2f} s for every resolution's{worker}; update and scrape "
        "together (the bench pre-renders both formats, a server scraped in one pays its share): "
        f"{totals}."
    )


def scrape_section(after: Json, before: Json | None) -> str:
    """Scrape bytes and time, and where the bytes go, from cardinality(_before).json."""
    runs = [("now", after)] + ([("before: 92cb660", before)] if before else [])
    rows = [
        [
            label,
            f"{r['series']:,}",
            f"{r['windows']:,}",
            f"{r['scrape_plain_mb']:.1f} MB",
            f"{r['scrape_gzip_mb']:.2f} MB",
            f"{r['bytes_per_kind_series']:,.0f}",
            f"{r['scrape_gzip_cpu_s']:.2f} s ({r['scrape_gzip_s']:.2f} s)",
            f"{r['scrape_plain_cpu_s']:.2f} s ({r['scrape_plain_s']:.2f} s)",
            f"{r['render_cpu_s']:.2f} s",
            f"{r['memory_mib']:.0f} MiB",
        ]
        for label, r in runs
    ]
    levels = [
        [level, f"{cost['mb']:.2f} MB", f"{cost['cpu_s']:.3f} s"]
        for level, cost in after.get("gzip_levels", {}).items()
    ]
    families = [
        [f"`{name}`", f"{size / 1e6:.2f} MB", f"{size / after['scrape_plain_mb'] / 1e4:.1f} %"]
        for name, size in after.get("families", {}).items()
        if size >= 1e4
    ]
    pb_rows = [
        [
            label,
            f"{r['body_pb_mb']:.1f} MB",
            f"{r['scrape_pb_gzip_mb']:.2f} MB",
            f"{r['scrape_pb_gzip_cpu_s']:.2f} s ({r['scrape_pb_gzip_s']:.2f} s)",
            *(
                f"{r[key]:.2f} s" if key in r else ""
                for key in (
                    "scrape_pb_minute_cpu_s",
                    "scrape_minute_cpu_s",
                    "scrape_pb_all_changed_cpu_s",
                    "scrape_all_changed_cpu_s",
                )
            ),
        ]
        for label, r in runs
        if "scrape_pb_gzip_mb" in r
    ]
    pb_families = [
        [f"`{name}`", f"{size['raw'] / 1e6:.2f} MB", f"{size['gzip'] / 1e6:.3f} MB"]
        for name, size in after.get("families_pb", {}).items()
        if size["gzip"] >= 1e4
    ]
    protobuf = (
        "\n\nThe protobuf body (what a Prometheus with native histograms on asks for, for every "
        "family; the same scrapes, after the same batches). CPU of a scrape right after the "
        "10 s and 1 m windows closed (*after a minute*: at Prometheus' default 1m interval every "
        "scrape is one), and after every resolution's closed (*after all*, once an hour), in "
        "protobuf and in text:\n\n"
        + table(
            [
                "exporter",
                "protobuf",
                "gzip",
                "protobuf scrape",
                "after a minute",
                "text, after a minute",
                "after all",
                "text, after all",
            ],
            pb_rows,
        )
        + _scrape_updates(after)
        + (
            "\n\nWhere the protobuf goes (each family gzipped alone):\n\n"
            + table(["family", "protobuf", "gzip"], pb_families)
            if pb_families
            else ""
        )
        if pb_rows
        else ""
    )
    return (
        f"{SCRAPE_TITLE}\n\n"
        f"`{after.get('command', 'python -m bench.cardinality --save')}` fills the exporter with "
        f"{after['series']:,} probe partitions ({after['topics']} topics, three kinds, "
        f"resolutions 10s, 1m, 1h; {after['rate_per_s']} msgs/s per partition, the probe's "
        "default, so a 1h window supports p99.999) and a latency distribution of their own, then "
        "scrapes /metrics over HTTP, each scrape right after a batch of 10 s windows (median of "
        f"{after['scrapes']}). Targets: ≤ {SCRAPE_TARGET_MB:g} MB on the wire (Prometheus asks "
        f"for gzip) and ≤ {SCRAPE_TARGET_S:g} s. Times are CPU seconds of the exporter's process "
        "(wall time in brackets: the machine ran other work). Bytes per series: text per "
        "(cluster, topic, partition, kind) series, its three resolutions together. Memory: "
        "Python allocations (tracemalloc) of the filled exporter.\n\n"
        + table(
            [
                "exporter",
                "partitions",
                "windows",
                "text",
                "gzip",
                "bytes per series",
                "gzip scrape",
                "plain scrape",
                "first render",
                "memory",
            ],
            rows,
        )
        + (
            f"\n\nBefore: per-partition histograms (24 `le` bounds each), every scrape joining "
            f"all windows' lines and building the counters through prometheus_client, gzip "
            f"level 1; measured with the same bench (`{before.get('command', '')}`)."
            if before
            else ""
        )
        + "\n\nThe server's gzip level for text (`runtime.webserver.GZIP_LEVEL`; protobuf "
        "scrapes use `PROTOBUF_GZIP_LEVEL`), measured on this "
        "body gzipped whole (the server compresses by parts: a resolution's unchanged chunk "
        "once):\n\n"
        + table(["level", "on the wire", "CPU"], levels)
        + "\n\nWhere the text goes (now):\n\n"
        + table(["family", "text", "share"], families)
        + protobuf
        + "\n"
    )
