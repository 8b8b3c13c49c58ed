"""docs/benchmarks.md's aggregation section: Spark against the pure-Python hdrh loop, scale."""

from __future__ import annotations

from bench.report_format import Json, table


def summarise_aggregation(agg: Json) -> str:
    """Echoes/s on local[1] and local[2] against the target and the pure-Python hdrh loop."""
    runs, hdrh = agg.get("runs", {}), agg.get("hdrh_python_loop", {})
    one, two = runs.get("local[1]", {}), runs.get("local[2]", {})
    target = agg.get("target_echoes_per_s", 0)
    two_per_s = two.get("echoes_per_s") or 0
    verdict = "met" if target and two_per_s >= target else "**not met**"
    return (
        f"Spark local[2] {two_per_s:,} echoes/s (local[1] {one.get('echoes_per_s') or 0:,}/s, "
        f"scaling {agg.get('scaling_local2_over_local1', '?')}×) vs the pure-Python hdrh loop "
        f"{hdrh.get('echoes_per_s', 0):,}/s: **{agg.get('spark_local2_vs_hdrh_ratio', '?')}×**; "
        f"target {target:,}/s on local[2] {verdict}"
    )


def scale_section(sc: Json) -> str:
    """Rows into Spark, throughput by format × master × batch size, fixed cost: ``bench.scale``."""
    out = ["From `bench/results/scale.json` (`python -m bench.scale`); every number with the "
           "1-minute load average at its end (the machine may be shared)."]  # fmt: skip
    if sc.get("rows"):
        rows = [
            [f"{r['echoes']:,}", str(r["series"]), str(r["tasks"]), f"{r['rows_into_spark']:,}",
             f"{r['rows_per_echo']:g}", f"{r['finest_bucket_rows_format1']:,}",
             f"{r['load_avg_1m']:g}"]
            for r in sc["rows"]
        ]  # fmt: skip
        header = ["echoes/batch", "series", "read tasks", "rows into Spark", "per echo",
                  "format 1 (finest only)", "load"]  # fmt: skip
        out.append("Rows into Spark per micro-batch (160 s of event time, 10s/1m/1h):\n\n"
                   + table(header, rows))  # fmt: skip
    if sc.get("spark"):
        rows = [
            [r.get("echo_format", "?"), r.get("master", "?"), f"{r.get('echoes_per_batch', 0):,}",
             f"{r.get('echoes_per_s') or 0:,}", f"{max(r.get('partials_per_batch') or [0]):,}",
             f"{r.get('max_state_rows', 0):,}", str(r.get("job_cpu_us_per_echo")),
             str(r.get("load_avg_1m_end"))]
            for r in sc["spark"]
        ]  # fmt: skip
        header = ["format", "master", "echoes/batch", "echoes/s", "max rows into Spark",
                  "state rows", "job CPU µs/echo", "load"]  # fmt: skip
        out.append("Apart from Kafka (replayed):\n\n" + table(header, rows))
    fixed = sc.get("fixed")
    if fixed:
        out.append(
            f"Fixed cost of a micro-batch (500 echoes, local[2]): "
            f"{fixed.get('fixed_batch_s_median')} s (median). Job CPU at 1,500 echoes/s with "
            f"a 5 s trigger: {fixed.get('job_cpu_core_share_at_1500_per_s_5s_trigger')} of a core."
        )
    for key, intro in (
        ("live", "The job's CPU at live rates (`python -m bench.scale --only live`): "),
        ("live_levers", "The same with both fixed-cost levers of the stage breakdown (the "
         "in-memory state store and 1 shuffle partition; `python -m bench.scale --only "
         "live_levers`): "),
    ):  # fmt: skip
        live = sc.get(key)
        if live:
            out.append(_live_table(live, intro))
    return "\n\n".join(out) + "\n"


def _live_table(live: list[Json], intro: str) -> str:
    """One row per live rate: the job's CPU in cores, per echo and per batch."""
    if live:
        rows = [
            [f"{r['echoes_per_s']:,}", f"{r['echoes_per_batch']:,}", str(r["batches_measured"]),
             f"**{r['job_cpu_core_share']}**", str(r["job_cpu_us_per_echo"]),
             f"{r['job_cpu_s_per_batch']} s", ", ".join(f"{b:g}" for b in r["batch_busy_s"]),
             str(r["load_avg_1m_end"])]
            for r in live
        ]  # fmt: skip
        header = ["echoes/s", "echoes a batch", "batches measured", "job CPU (cores)",
                  "CPU µs per echo", "CPU per batch", "batch times (s)", "load"]  # fmt: skip
        return (
            intro + "v2 echoes of 12 "
            "series replayed a 5 s trigger's worth per micro-batch (the default trigger), their "
            "event time advancing with the wall clock so windows close as they would live; CPU "
            "of the whole job (driver, JVM, Python workers) over the batches after 3 warm-up "
            "ones, per second of wall time. Target: ≤ 0.1 of a core at 1,500 echoes/s.\n\n"
            + table(header, rows)
        )
    return ""


def aggregation_section(agg: Json) -> str:
    """Per-master table of the replay benchmark."""
    rows = []
    for master, r in agg.get("runs", {}).items():
        rows.append(
            [
                master,
                f"{r.get('echoes', 0):,}",
                f"{r.get('rows_per_batch', 0):,}",
                f"{r.get('echoes_per_s') or 0:,}",
                f"{r.get('cold_batch_s', '?')} s",
                ", ".join(f"{b:g}" for b in r.get("batch_busy_s", [])),
                f"{r.get('max_state_rows', 0):,}",
            ]
        )
    header = [
        "master",
        "echoes",
        "per batch",
        "echoes/s (steady)",
        "first batch",
        "batch times (s)",
        "state rows",
    ]
    hdrh = agg.get("hdrh_python_loop", {})
    return (
        "From `bench/results/aggregation.json` (`bench/aggregation.py`). "
        + str(agg.get("setup", ""))
        + "\n\n"
        + table(header, rows)
        + f"\n\nBaseline in the same run: the pure-Python `hdrh` loop recorded "
        f"{hdrh.get('echoes', 0):,} echoes ({hdrh.get('record_calls_per_echo', '?')} "
        f"`record_value` calls each) at {hdrh.get('echoes_per_s', 0):,} echoes/s.\n"
    )
