"""Generate ``docs/benchmarks.md`` and its plots from the result JSON files, and nothing else.

No number is typed here: every figure in the markdown is read from ``bench/results/*.json``.
A part whose JSON is missing gets a line saying so (and why, if the runner recorded it).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from bench.machine import RESULTS_DIR

ROOT = Path(__file__).resolve().parent.parent
DOC_PATH = ROOT / "docs" / "benchmarks.md"
IMG_DIR = ROOT / "docs" / "img"
COMMAND = "make bench  # = .venv/bin/python -m bench.run"

Json = dict[str, Any]

QUANTILE_NAMES = {
    "0.5": "p50",
    "0.9": "p90",
    "0.99": "p99",
    "0.999": "p99.9",
    "0.9999": "p99.99",
    "0.99999": "p99.999",
    "0.999999": "p99.9999",
    "1.0": "max",
}


def load_results(results_dir: Path = RESULTS_DIR) -> dict[str, Json]:
    """Every ``<name>.json`` in the results folder, keyed by name."""
    out: dict[str, Json] = {}
    for path in sorted(results_dir.glob("*.json")):
        try:
            out[path.stem] = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            out[path.stem] = {"unreadable": f"{type(exc).__name__}: {exc}"}
    return out


def qname(q: str | float) -> str:
    """``0.999`` → ``p99.9``; the max is ``max``."""
    key = str(q)
    return QUANTILE_NAMES.get(key, f"p{float(key) * 100:g}")


def fmt_seconds(x: Any) -> str:
    """A latency in the unit a human reads fastest (µs, ms or s)."""
    if isinstance(x, str):
        return x
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "n/a"
    v = float(x)
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    if abs(v) < 1e-3:
        return f"{v * 1e6:.0f} µs"
    if abs(v) < 1:
        return f"{v * 1e3:.3g} ms"
    return f"{v:.4g} s"


def fmt_error(x: Any) -> str:
    """A signed relative error as a percentage with enough digits to tell 0.01 % from 0."""
    if isinstance(x, str):
        return x
    v = float(x)
    if math.isnan(v):
        return "n/a"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    pct = v * 100
    if pct == 0:
        return "0 %"
    if abs(pct) < 0.1:
        return f"{pct:+.3f} %"
    if abs(pct) < 10:
        return f"{pct:+.2f} %"
    return f"{pct:+.0f} %"


def table(header: list[str], rows: Iterable[Iterable[Any]]) -> str:
    """A GitHub markdown table."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def flatten(obj: Any, prefix: str = "") -> list[tuple[str, Any]]:
    """Dotted key/value pairs of a nested JSON object (lists of numbers shown inline)."""
    if isinstance(obj, Mapping):
        out: list[tuple[str, Any]] = []
        for k, v in obj.items():
            out += flatten(v, f"{prefix}.{k}" if prefix else str(k))
        return out
    if isinstance(obj, list) and obj and all(isinstance(x, Mapping) for x in obj):
        out = []
        for i, v in enumerate(obj):
            out += flatten(v, f"{prefix}[{i}]")
        return out
    if isinstance(obj, list) and len(obj) > 12:
        return [(prefix, f"[{len(obj)} values]")]
    return [(prefix, obj)]


def generic_table(data: Json) -> str:
    """Every measured field of a result we do not know the shape of, as a key/value table."""
    rows = [(f"`{k}`", v) for k, v in flatten({k: v for k, v in data.items() if k != "machine"})]
    return table(["field", "value"], rows)


# --- accuracy -------------------------------------------------------------------------------


def accuracy_section(acc: Json, img_rel: str | None) -> str:
    """Per-dataset error tables of every method against the exact quantiles."""
    qs = acc["quantiles"]
    parts = [
        "## Accuracy of the high nines\n",
        f"{acc['datasets'][0]['samples']:,} samples per dataset in {acc['datasets'][0]['windows']} "
        f"windows of {acc['datasets'][0]['window_s']:g} s (pure numpy, seed {acc['seed']}"
        f"{', **quick mode**' if acc.get('quick') else ''}). The truth is the exact nearest-rank "
        "quantile over all samples. Each cell is the method's reading and its signed relative "
        "error. Methods:\n",
        "- **nines**: one HDR histogram (3 significant digits) per window, merged by adding "
        "bucket counts; quantile read from the merge (`core.hdr`).",
        "- **average of per-window percentiles**: the exact percentile of each window, averaged "
        "(what a dashboard's `avg` over time or over partitions shows); for the max, the average "
        "of the window maxes.",
        "- **Prometheus classic histogram**: default buckets "
        "(.005 … 10 s), read with `histogram_quantile` (linear interpolation inside a bucket; a "
        "rank in the `+Inf` bucket returns the highest finite bound, 10 s). `bench.promql` "
        "reimplements Prometheus's algorithm and is tested against `promtool`. Counts of all "
        "windows are summed first, the best case for this method.",
        "- **Xinfra Monitor**: Kafka metrics `Percentiles` with 1 ms constant bins up to 5 s "
        "(its defaults; values above land in the last bin), float32 readout; max read as the top "
        "occupied bin. Computed over the whole run at once, again the best case.\n",
    ]
    parts.append(
        "Reading the tables: averaging percentiles fails whenever windows differ (a stall or a "
        "slow mode lives in a few windows); the classic histogram is only as good as its bucket "
        "bounds — linear interpolation is exact for samples spread uniformly inside a bucket "
        "(the CTRL+Z ramp, uniform hiccups) and off by up to the bucket width otherwise, and it "
        "cannot see past 10 s; Xinfra's 1 ms bins are precise below 5 s and blind above it. "
        "nines' error is bounded by the HDR precision (3 digits: ≤ 0.1 %) and its max is exact.\n"
    )
    for ds in acc["datasets"]:
        parts.append(f"### {ds['name']}: {ds['description']}\n")
        header = ["method", *[qname(q) for q in qs]]
        rows: list[list[str]] = [["**exact**", *[fmt_seconds(ds["exact_s"][q]) for q in qs]]]
        for m in ds["methods"].values():
            rows.append(
                [
                    m["label"],
                    *[
                        f"{fmt_seconds(m['value_s'][q])} ({fmt_error(m['rel_error'][q])})"
                        for q in qs
                    ],
                ]
            )
        parts.append(table(header, rows) + "\n")
    if img_rel:
        parts.append(f"![absolute relative error by method]({img_rel})\n")
    return "\n".join(parts)


def plot_accuracy(acc: Json, out: Path) -> None:
    """Grouped bars of |relative error| (log scale) per quantile, one panel per dataset."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    qs = acc["quantiles"]
    datasets = acc["datasets"]
    fig, axes = plt.subplots(1, len(datasets), figsize=(4.2 * len(datasets), 4.0), sharey=True)
    axes = np.atleast_1d(axes)
    floor = 1e-5
    for ax, ds in zip(axes, datasets, strict=True):
        methods = list(ds["methods"].values())
        width = 0.8 / len(methods)
        for i, m in enumerate(methods):
            errs = []
            for q in qs:
                e = m["rel_error"][q]
                v = float(e) if not isinstance(e, str) or e in ("inf", "-inf") else math.nan
                errs.append(max(abs(v), floor) if math.isfinite(v) else 10.0)
            ax.bar(
                np.arange(len(qs)) + (i - (len(methods) - 1) / 2) * width,
                errs,
                width,
                label=m["label"],
            )
        ax.set_yscale("log")
        ax.set_xticks(np.arange(len(qs)), [qname(q) for q in qs])
        ax.set_title(ds["name"])
        ax.axhline(1e-3, color="grey", lw=0.7, ls="--")
    axes[0].set_ylabel(f"|relative error| (floor {floor:g}; dashed = 0.1 %)")
    axes[0].legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


# --- coordinated omission -------------------------------------------------------------------


def plot_co(co: Json, out: Path) -> None:
    """Latency by percentile of the open-loop probe, the closed-loop prober and the arithmetic."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from bench.coordinated_omission import percentile_curve

    fig, ax = plt.subplots(figsize=(8, 4.8))
    for key, style in (("nines", "-"), ("naive", "--"), ("naive_corrected", "-.")):
        run = co.get(key)
        if run and run.get("latencies_us"):
            x, y = percentile_curve(run["latencies_us"])
            ax.plot(x, y, style, lw=2, label=f"{run['label']} ({len(run['latencies_us']):,})")
    exp = co.get("expected")
    if exp:
        ax.plot(exp["x"], exp["latency_s"], ":", color="black", lw=1.5, label=exp["label"])
    ax.set_xscale("log")
    ax.set_yscale("log")
    ticks = [1, 10, 100, 1_000, 10_000, 100_000, 1_000_000]
    ax.set_xticks(ticks, ["0 %", "90 %", "99 %", "99.9 %", "99.99 %", "99.999 %", "99.9999 %"])
    ax.set_xlim(1, 1_000_000)
    ax.set_xlabel("percentile")
    ax.set_ylabel("latency (s)")
    ax.set_title(co.get("title", "CTRL+Z test"))
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def co_section(co: Json, img_rel: str | None) -> str:
    """The CTRL+Z table: each prober's quantiles against the open-loop arithmetic."""
    qs = [q for q in co["quantiles"]]
    header = ["prober", "samples", *[qname(q) for q in qs]]
    rows = []
    exp = co["expected"]
    rows.append(["**expected (open loop)**", "", *[fmt_seconds(exp["quantiles_s"][q]) for q in qs]])
    for key in ("nines", "naive", "naive_corrected"):
        run = co.get(key)
        if not run:
            continue
        rows.append(
            [
                run["label"],
                f"{run['samples']:,}",
                *[
                    f"{fmt_seconds(run['quantiles_s'][q])} ({fmt_error(run['rel_error'][q])})"
                    for q in qs
                ],
            ]
        )
    text = [
        "## Coordinated omission: the CTRL+Z test\n",
        co["setup"] + "\n",
        exp["derivation"] + "\n",
        table(header, rows) + "\n",
    ]
    if img_rel:
        text.append(f"![latency by percentile, CTRL+Z]({img_rel})\n")
    return "\n".join(text)


# --- document -------------------------------------------------------------------------------


def machine_block(results: dict[str, Json]) -> str:
    """The machine and versions each result file was measured on."""
    rows = []
    for name, data in results.items():
        m = data.get("machine")
        if not isinstance(m, Mapping):
            continue
        rows.append(
            [
                f"`{name}.json`",
                m.get("timestamp", "?"),
                m.get("cores", m.get("cpus", "?")),
                m.get("load_avg_1m", "?"),
                m.get("python", "?"),
                m.get("pyspark", "?"),
                m.get("librdkafka", "?"),
                m.get("git_commit", "?"),
            ]
        )
    header = [
        "result",
        "when (UTC)",
        "cores",
        "load 1m",
        "Python",
        "PySpark",
        "librdkafka",
        "commit",
    ]
    return table(header, rows)


def _get(data: Json | None, *path: str) -> Any:
    """A nested field, or None when any step is missing."""
    cur: Any = data
    for p in path:
        if not isinstance(cur, Mapping) or p not in cur:
            return None
        cur = cur[p]
    return cur


def headline(results: dict[str, Json]) -> list[str]:
    """The numbers a reader wants first, each read from a result file."""
    lines: list[str] = []
    co = results.get("co")
    if co and co.get("nines") and co.get("naive"):
        sc = co.get("scenario", {})
        lines.append(
            f"- **CTRL+Z** ({co.get('title', '').removeprefix('CTRL+Z: ')}): the open-loop probe "
            "recorded "
            f"{co['nines']['samples']:,} samples, the closed-loop prober "
            f"{co['naive']['samples']:,} at a target of {sc.get('rate', '?')}/s."
        )
        for q in ("0.99", "0.999", "1.0"):
            expected = fmt_seconds(co["expected"]["quantiles_s"][q])
            lines.append(
                f"- **CTRL+Z {qname(q)}**: expected {expected}; "
                f"{co['nines']['label']} {fmt_seconds(co['nines']['quantiles_s'][q])} "
                f"({fmt_error(co['nines']['rel_error'][q])}), {co['naive']['label']} "
                f"{fmt_seconds(co['naive']['quantiles_s'][q])} "
                f"({fmt_error(co['naive']['rel_error'][q])})."
            )
    else:
        lines.append(f"- CTRL+Z test: not measured in this run ({_skip_reason(results, 'co')}).")
    acc = results.get("accuracy")
    if acc:
        lines.append(
            "- **Accuracy** (relative error at p99.99 / worst |error| over p99 … max):\n\n"
            + accuracy_headline_table(acc)
            + "\n"
        )
    else:
        lines.append(f"- Accuracy: not measured ({_skip_reason(results, 'accuracy')}).")
    lines += headline_external(results)
    lines.append(headline_floor(results))
    lines.append(headline_health(results))
    lines.append(headline_soak(results))
    lines.append(headline_scrape(results))
    return lines


SHORT_LABELS = {
    "nines": "nines (merged HDR)",
    "avg_pct": "avg of percentiles",
    "prom_classic": "Prometheus classic",
    "xinfra": "Xinfra 1 ms bins",
}


def _worst(errors: Mapping[str, Any]) -> float:
    """The largest |relative error| over the studied quantiles (inf/nan count as inf)."""
    worst = 0.0
    for e in errors.values():
        v = float(e)
        worst = max(worst, abs(v) if math.isfinite(v) else math.inf)
    return worst


def accuracy_headline_table(acc: Json) -> str:
    """Datasets × methods: error at p99.99 and the worst error from p99 to the max."""
    keys = list(acc["datasets"][0]["methods"])
    rows = []
    for ds in acc["datasets"]:
        cells = [
            f"{fmt_error(m['rel_error']['0.9999'])} / "
            f"{fmt_error(_worst(m['rel_error'])).lstrip('+')}"
            for m in (ds["methods"][k] for k in keys)
        ]
        rows.append([ds["name"], *cells])
    return table(["dataset", *[SHORT_LABELS.get(k, k) for k in keys]], rows)


def _skip_reason(results: dict[str, Json], part: str) -> str:
    """Why the runner did not produce a part, as it recorded it."""
    status = _get(results.get("run"), "parts", part)
    if isinstance(status, Mapping):
        return str(status.get("reason") or status.get("status"))
    return "no result file"


def headline_external(results: dict[str, Json]) -> list[str]:
    """Headline lines from the aggregation and probe bench JSON."""
    lines: list[str] = []
    agg = results.get("aggregation")
    if agg:
        lines.append("- **Aggregation apart from Kafka**: " + summarise_aggregation(agg) + ".")
    else:
        lines.append(
            "- Aggregation apart from Kafka: not measured "
            f"({_skip_reason(results, 'aggregation')})."
        )
    probe = results.get("probe")
    if probe:
        lines.append("- **Probe**: " + summarise_probe(probe) + ".")
    else:
        lines.append(f"- Probe send lag / CPU: not measured ({_skip_reason(results, 'probe')}).")
    return lines


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
        f"target {target:,}/s {verdict}"
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


def summarise_probe(probe: Json) -> str:
    """Send-lag p99.9 and CPU at each rate against the targets, and the end-to-end floor."""
    rates = probe.get("rates")
    if not isinstance(rates, Mapping) or not rates:
        pairs = [(k, v) for k, v in flatten(probe) if not k.startswith("machine")]
        keep = [f"`{k}` = {v}" for k, v in pairs if any(s in k for s in ("99.9", "999", "cpu"))]
        return "; ".join(keep[:8]) or "see the probe section"
    targets = probe.get("targets") if isinstance(probe.get("targets"), Mapping) else {}
    target_rate = str(targets.get("rate", ""))
    parts = []
    for rate, r in rates.items():
        if not _is_default(r):
            continue
        text = (
            f"at {_run_label(rate, r)} msgs/s send lag p99.9 "
            f"**{_us(_get(r, 'send_lag_us', 'p999'))}**, "
            f"CPU **{_pct(r.get('cpu_pct_of_core'))}** of a core"
        )
        if rate == target_rate:
            text += (
                f" (targets ≤ {_us(targets.get('send_lag_p999_us'))}, "
                f"≤ {_pct(targets.get('cpu_pct_of_core'))}: {_met(_get(probe, 'met', 'all'))})"
            )
        parts.append(text)
    floor = rates.get(target_rate) or next(iter(rates.values()))
    parts.append(
        f"end-to-end floor on the embedded broker p50 {_us(_get(floor, 'e2e_us', 'p50'))}, "
        f"p99.9 {_us(_get(floor, 'e2e_us', 'p999'))}"
    )
    for r in rates.values():
        if not _is_default(r):
            parts.append(
                f"with {_settings_text(r)} p50 "
                f"{_us(_get(r, 'e2e_us', 'p50'))}, p99.9 {_us(_get(r, 'e2e_us', 'p999'))}"
            )
    return "; ".join(parts)


def _run_label(key: str, r: Json) -> str:
    """A probe run's rate, and the librdkafka settings it overrode if any."""
    rate = r.get("rate_total_per_s", key)
    try:
        text = f"{int(rate):,}"
    except (TypeError, ValueError):
        text = str(key)
    if not _is_default(r):
        text += f" ({_settings_text(r)})"
    return text


def _settings_text(r: Json) -> str:
    """The librdkafka settings a probe run overrode, as inline code."""
    settings = r.get("kafka_settings")
    if not isinstance(settings, Mapping):
        return ""
    return ", ".join(f"`{k}: {v}`" for k, v in settings.items())


def _is_default(r: Json) -> bool:
    return not r.get("kafka_settings")


def _us(x: Any) -> str:
    """Integer microseconds as a human latency."""
    return "n/a" if x is None else fmt_seconds(float(x) / 1e6)


def _pct(x: Any) -> str:
    return "n/a" if x is None else f"{float(x):.1f} %"


def _met(x: Any) -> str:
    return "n/a" if x is None else ("**met**" if x else "**not met**")


def _control(c: Any) -> str:
    if not isinstance(c, Mapping) or c.get("p999") is None:
        return "n/a"
    return f"{_us(c['p999'])} / {_us(c.get('max'))}"


def probe_section(probe: Json) -> str:
    """One row per rate: echoes, send lag, end-to-end floor, CPU, RSS slope, targets met."""
    rates = probe.get("rates")
    if not isinstance(rates, Mapping) or not rates:
        source = "From `bench/results/probe.json` (written by `tests/bench/`).\n"
        return f"{source}\n{generic_table(probe)}\n"
    targets = probe.get("targets") if isinstance(probe.get("targets"), Mapping) else {}
    target_rate = str(targets.get("rate", ""))
    lag_max, cpu_max = targets.get("send_lag_p999_us"), targets.get("cpu_pct_of_core")
    header = [
        "rate (msgs/s)",
        "messages",
        "send lag p50",
        "p99",
        "p99.9",
        "max",
        "e2e p50",
        "e2e p99.9",
        "e2e max",
        "CPU (% of a core)",
        "RSS slope",
        "target met",
    ]
    rows, extra = [], []
    for rate, r in rates.items():
        if r.get("error"):
            rows.append([_run_label(rate, r), f"**failed**: {r['error']}", *["n/a"] * 10])
            continue
        lag, e2e = r.get("send_lag_us") or {}, r.get("e2e_us") or {}
        messages = f"{r.get('messages', 0):,}"
        faults = [f"{r[k]:,} {k}" for k in ("missing", "lost", "duplicates") if r.get(k)]
        if r.get("bad_records"):
            faults.append(f"{sum(r['bad_records'].values()):,} bad records")
        if faults:
            messages += f" (**{', '.join(faults)}**)"
        if rate != target_rate or not _is_default(r) or lag_max is None or cpu_max is None:
            met = "no target"
        else:
            misses = []
            if lag.get("p999") is None or lag["p999"] > lag_max:
                misses.append(f"p99.9 > {_us(lag_max)}")
            if r.get("cpu_pct_of_core") is None or r["cpu_pct_of_core"] > cpu_max:
                misses.append(f"CPU > {_pct(cpu_max)}")
            met = "yes" if not misses else f"**no** ({'; '.join(misses)})"
        slope = r.get("rss_slope_mib_per_min")
        rows.append(
            [
                _run_label(rate, r),
                messages,
                *[_us(lag.get(k)) for k in ("p50", "p99", "p999", "max")],
                *[_us(e2e.get(k)) for k in ("p50", "p999", "max")],
                _pct(r.get("cpu_pct_of_core")),
                "n/a" if slope is None else f"{slope:+.2f} MiB/min",
                met,
            ]
        )
        publish = r.get("publish_us") or {}
        extra.append(
            [
                _run_label(rate, r),
                f"{r.get('duration_s', '?')} s",
                f"{_us(publish.get('p50'))} / {_us(publish.get('p999'))}",
                _us(r.get("hiccup_max_us")),
                _control(r.get("control_oversleep_us")),
                _pct(r.get("broker_cpu_pct_of_core")),
                f"{r.get('rss_mib_start', '?')} → {r.get('rss_mib_end', '?')} "
                f"(max {r.get('rss_mib_max', '?')})",
                r.get("load_avg_1m_at_end", "?"),
            ]
        )
    first = next(iter(rates.values()))
    intro = (
        f"From `bench/results/probe.json` (`tests/bench/test_probe_bench.py`"
        f"{', **quick mode**' if probe.get('quick') else ''}). One `nines probe` process per "
        f"rate, {first.get('size_bytes', '?')}-byte payloads over {first.get('partitions', '?')} "
        "partitions of a fresh embedded broker (its own process, no injected RTT). Rates are "
        "totals over all partitions. Send lag is `sent_us - intended_us` (how late the probe "
        "itself sent); e2e is `received_us - intended_us`, the floor of what the probe can "
        "measure on this broker. Quantiles are exact (nearest rank) over every echo intended in "
        "the measured interval, which must all be present and none lost. CPU is utime + stime "
        "of the probe process over that interval; the RSS slope is fitted over the second half "
        "of the run. The control oversleep is an idle process sleeping 1 ms at a time beside "
        "the probe during the same interval (`bench/control_hiccup.py`): how late this machine "
        "wakes anything up at that moment, the floor under any send lag.\n"
    )
    if lag_max is not None and cpu_max is not None:
        intro += (
            f"\nTarget at {int(target_rate or 0):,} msgs/s: send lag p99.9 ≤ {_us(lag_max)} "
            f"and CPU ≤ {_pct(cpu_max)} of a core — "
            f"{_met(_get(probe, 'met', 'all'))}."
        )
        control = (rates.get(target_rate) or {}).get("control_oversleep_us")
        if isinstance(control, Mapping) and control.get("p999") is not None:
            intro += (
                " For scale: the idle control process beside it woke up to "
                f"{_us(control['p999'])} late at p99.9 in the same interval (this machine's "
                "floor under any send lag)."
            )
        intro += "\n"
    for rate, r in rates.items():
        if r.get("consumer_offset_resets"):
            intro += (
                f"\nAt {_run_label(rate, r)} msgs/s the probe's consumer fell further behind "
                "than the embedded broker keeps (~5 MiB per partition) and was reset past deleted "
                f"offsets {r['consumer_offset_resets']} time(s): the messages it skipped are "
                "lost (or, skipped within a loss timeout of the end, missing). A limit of the "
                "test broker on a saturated machine; real Kafka would have kept them (and shown "
                "the delay in e2e).\n"
            )
    details = table(
        [
            "rate (msgs/s)",
            "measured",
            "publish p50 / p99.9",
            "probe hiccup max",
            "control oversleep p99.9 / max",
            "broker CPU",
            "probe RSS MiB start → end",
            "load 1m",
        ],
        extra,
    )
    threads = [
        f"- at {_run_label(rate, r)} msgs/s: "
        + ", ".join(
            f"{name} {_pct(pct)}"
            for name, pct in sorted(r["cpu_pct_by_thread"].items(), key=lambda kv: -kv[1])
            if pct >= 0.05
        )
        for rate, r in rates.items()
        if isinstance(r.get("cpu_pct_by_thread"), Mapping) and _is_default(r)
    ]
    if threads:
        details += (
            "\n\nWhere the probe's CPU goes, by thread (the `nines-*` threads are the probe's "
            "Python threads, `rdk:*` librdkafka's, summed over its three clients):\n\n"
            + "\n".join(threads)
        )
    if any(not _is_default(r) for r in rates.values()):
        details += (
            "\n\nThe run with `fetch.wait.max.ms: 1` separates the embedded broker's share of the "
            "end-to-end floor: librdkafka's mock cluster holds a fetch that finds no new data for "
            "the whole `fetch.wait.max.ms` (the probe's default is 10 ms), even if data arrives "
            "meanwhile, where real Kafka answers as soon as it does. So on the embedded broker "
            "the floor includes up to that wait; on Kafka it does not."
        )
    return f"{intro}\n{table(header, rows)}\n\n{details}\n"


# --- end-to-end floor on both test brokers ---------------------------------------------------

FLOOR_TITLE = "## End-to-end floor: Apache Kafka, the mock and Tansu side by side"


def _floor_runs(data: Json | None) -> dict[str, Json]:
    runs = _get(data, "runs")
    return {k: dict(r) for k, r in runs.items() if isinstance(r, Mapping)} if runs else {}


def _broker_label(key: str, run: Json) -> str:
    """``kafka-3`` as "Apache Kafka, 3 brokers, RF 3"; the test brokers by name."""
    name = key.split()[0]
    if run.get("engine") == "kafka":
        brokers, rf = run.get("brokers", 1), run.get("replication_factor", 1)
        return f"Apache Kafka ({brokers} broker{'s' if brokers != 1 else ''}, RF {rf})"
    return name


def headline_floor(results: dict[str, Json]) -> str:
    """One line: each engine's e2e p50 / p99.9 / max at the probe's default settings."""
    runs = {k: r for k, r in _floor_runs(results.get("floor")).items() if _is_default(r)}
    if not runs:
        return f"- End-to-end floor: not measured ({_skip_reason(results, 'floor')})."
    parts = [
        f"{_broker_label(key, r)} p50 **{_us(_get(r, 'e2e_us', 'p50'))}**, "
        f"p99.9 {_us(_get(r, 'e2e_us', 'p999'))}, max {_us(_get(r, 'e2e_us', 'max'))}"
        if r.get("e2e_us")
        else f"{_broker_label(key, r)} failed ({r.get('error', 'no echoes')})"
        for key, r in runs.items()
    ]
    rate = next(iter(runs.values())).get("rate_total_per_s", "?")
    return f"- **End-to-end floor** at {rate:,} msgs/s, one run: " + "; ".join(parts) + "."


def floor_section(data: Json) -> str:
    """One row per engine and setting: echoes, e2e p50/p99/p99.9/max, publish, send lag."""
    runs = _floor_runs(data)
    header = [
        "broker",
        "probe settings",
        "messages",
        "e2e p50",
        "p99",
        "p99.9",
        "max",
        "publish p50 / p99.9",
        "send lag p99.9",
        "CPU probe / broker",
        "load 1m",
    ]
    rows = []
    for key, r in runs.items():
        settings = _settings_text(r) or "defaults (`fetch.wait.max.ms: 10`)"
        if "error" in r:
            rows.append([_broker_label(key, r), settings, f"**failed**: {r['error']}"] + [""] * 8)
            continue
        count = f"{r.get('messages', 0):,}"
        bad = {k: r.get(k) for k in ("missing", "duplicates", "lost") if r.get(k)}
        if bad:
            count += " (" + ", ".join(f"**{v:,} {k}**" for k, v in bad.items()) + ")"
        if r.get("probe_unresolved_at_stop"):
            count += f"; {r['probe_unresolved_at_stop']:,} still in flight when the probe stopped"
        cpu = r.get("cpu_pct_of_core") or {}
        e2e = r.get("e2e_us") or {}
        rows.append(
            [
                _broker_label(key, r),
                settings,
                count,
                _us(e2e.get("p50")),
                _us(e2e.get("p99")),
                _us(e2e.get("p999")),
                _us(e2e.get("max")),
                f"{_us(_get(r, 'publish_us', 'p50'))} / {_us(_get(r, 'publish_us', 'p999'))}",
                _us(_get(r, "send_lag_us", "p999")),
                f"{_pct(cpu.get('probe'))} / {_pct(cpu.get('broker'))}",
                r.get("load_avg_1m", "n/a"),
            ]
        )
    intro = (
        "From `bench/results/floor.json` (`python -m bench.floor`, part `floor` of "
        f"`bench.run`), measured in one run: {data.get('method', '')}. e2e is "
        "`received_us - intended_us`, the floor under anything the probe reports on that "
        "broker; publish is `acked_us - intended_us`; the send lag shows the probe itself was "
        "on time. Every echo intended in the interval must be there, once."
    )
    explain = (
        "**Apache Kafka** answers a Fetch as soon as a record is there, so its floor is the "
        "broker's own cost and this machine's scheduling; with three brokers, replication "
        "factor 3 and `acks=all`, a message is acknowledged, and readable, only once both "
        "followers have fetched it, one more round trip. Each broker is its own JVM (512 MiB "
        "heap, G1), warmed up for 4 s before the run.\n\n"
        "**The mock's fetch-wait floor.** librdkafka's mock cluster holds a Fetch that finds no "
        "new record for the consumer's whole `fetch.wait.max.ms`, even when a record arrives "
        "meanwhile; real Kafka answers as soon as `fetch.min.bytes` are there. A probe message "
        "produced while the probe's consumer has a fetch parked waits out the rest of it, so "
        "on the mock the e2e floor is the broker's own cost plus a wait spread over 0 to "
        "`fetch.wait.max.ms` (the probe's default 10 ms: the p50 sits near half of it, the "
        "tail at the full wait plus scheduling). The `fetch.wait.max.ms: 1` runs cut that "
        "share to at most 1 ms; on real Kafka the default already behaves like them.\n\n"
        "**Tansu** parks a Fetch that finds nothing too, and answers part-way through the wait "
        "more often than the mock. Its own cost is the larger part: Tansu 0.6.0 keeps its "
        "logs in memory and its time per request grows with their length (docs/brokers.md), "
        "so its floor drifts up while the run fills them (the slices below) and its CPU nears "
        "a full core. A consumer fetching every 1 ms asks it ten times as often: on a loaded "
        "machine it falls behind, and the probe stops with messages still in flight, which "
        "have no echo (counted as missing). On the mock the slices stay level unless this "
        "machine hiccups."
    )
    drift = [
        f"- {r.get('engine', key)}, {_settings_text(r) or 'defaults'}: p50 "
        + ", ".join(_us(x.get("p50")) for x in r["e2e_us_by_slice"])
        + "; max "
        + ", ".join(_us(x.get("max")) for x in r["e2e_us_by_slice"])
        for key, r in runs.items()
        if r.get("e2e_us_by_slice")
    ]
    if drift:
        first = next(r for r in runs.values() if r.get("e2e_us_by_slice"))
        step = first["e2e_us_by_slice"][1]["from_s"] if len(first["e2e_us_by_slice"]) > 1 else 0
        explain += (
            f"\n\nThe same e2e latency by {step:g} s of the measured interval, in order (a floor "
            "that drifts while the logs grow shows here):\n\n" + "\n".join(drift)
        )
    return f"{FLOOR_TITLE}\n\n{intro}\n\n{table(header, rows)}\n\n{explain}\n"


# --- probe soak ------------------------------------------------------------------------------

SOAK_TITLE = "## Probe soak: hours against the embedded broker"


def headline_soak(results: dict[str, Json]) -> str:
    """One line: duration, echoes, missing, RSS first → last and slope, from soak.json."""
    data = results.get("soak")
    if not isinstance(data, Mapping) or not data.get("intervals"):
        return "- Probe soak: not run (`make soak`, hours)."
    hours = float(data.get("elapsed_s", 0)) / 3600
    state = "" if data.get("complete") else " (**interrupted**: partial)"
    return (
        f"- **Probe soak**{state}: {hours:.2f} h at {data.get('rate_total_per_s', 0):,.0f} msgs/s, "
        f"{data.get('echoes', 0):,} echoes, {data.get('missing', 'n/a')} missing, "
        f"{data.get('duplicates', 0)} duplicated; probe RSS {data.get('rss_mib_first')} → "
        f"{data.get('rss_mib_last')} MiB (slope over the second half "
        f"{data.get('rss_slope_mib_per_hour_second_half')} MiB/h)."
    )


def _count(x: Any) -> str:
    return "n/a" if x is None else f"{int(x):,}"


def soak_section(data: Json) -> str:
    """One row per interval of the soak, from soak.json."""
    rows = []
    for r in data.get("intervals", []):
        lag, e2e = r.get("send_lag_us") or {}, r.get("e2e_us") or {}
        rows.append(
            [
                f"{r.get('t_min', 0):.0f}",
                f"{r.get('echoes', 0):,}",
                f"{r.get('lost', 0):,}",
                _us(lag.get("p999")),
                _us(lag.get("max")),
                _us(e2e.get("p50")),
                _us(e2e.get("p999")),
                _us(e2e.get("max")),
                _us(r.get("hiccup_max_us")),
                _pct(r.get("cpu_pct_of_core")),
                "n/a" if r.get("rss_mib") is None else f"{r['rss_mib']:.1f}",
                r.get("load_avg_1m", "?"),
            ]
        )
    intro = (
        "From `bench/results/soak.json` (`make soak` = `python -m bench.soak`"
        f"{'' if data.get('complete') else ', **interrupted, partial**'}). One `nines probe` "
        f"process at {data.get('rate_total_per_s', 0):,.0f} msgs/s of "
        f"{data.get('size_bytes', '?')} bytes against a fresh embedded broker for "
        f"{float(data.get('elapsed_s', 0)) / 3600:.2f} h; every echo is read back while it runs "
        "and checked off in a per-partition seq bitmap. Per interval: exact quantiles of that "
        "interval's echoes, the probe's CPU (utime + stime, all threads) and RSS at its end. "
        "The machine ran other work (tests, benchmarks) during the soak.\n\n"
        f"Totals: {data.get('echoes', 0):,} echoes for {_count(data.get('expected'))} messages "
        f"sent, **{data.get('missing', 'n/a')} missing**, {data.get('duplicates', 0)} "
        f"duplicated, {data.get('lost', 0):,} lost, "
        f"{sum((data.get('bad_records') or {}).values())} bad records, probe exit "
        f"{data.get('probe_exit_code', 'n/a')}. Probe RSS {data.get('rss_mib_first')} → "
        f"{data.get('rss_mib_last')} MiB (max {data.get('rss_mib_max')}); least-squares slope "
        f"over the second half **{data.get('rss_slope_mib_per_hour_second_half')} MiB/h**.\n"
    )
    header = [
        "minute",
        "echoes",
        "lost",
        "send lag p99.9",
        "send lag max",
        "e2e p50",
        "e2e p99.9",
        "e2e max",
        "probe hiccup max",
        "CPU",
        "RSS MiB",
        "load 1m",
    ]
    return f"{SOAK_TITLE}\n\n{intro}\n{table(header, rows)}\n"


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


# --- stream freshness and memory -------------------------------------------------------------

HEALTH_TITLE = "## Stream freshness and memory"


def headline_health(results: dict[str, Json]) -> str:
    """One line: worst freshness delay and total peak RSS, from stream_health.json."""
    data = results.get("stream_health")
    fresh, mem = _get(data, "freshness"), _get(data, "memory")
    if not isinstance(fresh, Mapping) and not isinstance(mem, Mapping):
        return f"- Stream freshness / memory: not measured ({_skip_reason(results, 'health')})."
    parts = []
    if isinstance(fresh, Mapping) and fresh.get("max_delay_s") is not None:
        parts.append(
            f"a closed 10 s window is on /metrics at most **{fresh['max_delay_s']:.2f} s** "
            f"({fresh.get('max_delay_triggers', '?')} triggers of {fresh.get('trigger_s', '?')} s) "
            f"after the watermark passed its end ({len(fresh.get('windows', []))} windows)"
        )
    peak = _get(mem, "rss", "total", "peak_rss_mib")
    if peak is not None:
        parts.append(
            f"**{peak:,.0f} MiB** peak RSS (driver + JVM + Python workers) with "
            f"{_get(mem, 'series') or 0:,} series"
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


def status_section(results: dict[str, Json]) -> str:
    """Which parts ran, how long they took, and why any did not."""
    run = results.get("run")
    if not run:
        return "_No `run.json`: the runner's status was not recorded._\n"
    parts = run.get("parts", {})
    rows = [
        [
            p,
            s.get("status", "?"),
            f"{s.get('wall_s', 0):.1f} s",
            s.get("finished", ""),
            s.get("reason", ""),
        ]
        for p, s in parts.items()
    ]
    total = sum(float(s.get("wall_s", 0)) for s in parts.values())
    return (
        f"Last invocation: `{' '.join(run.get('argv', []))}` ({run.get('wall_s', 0):.0f} s) on "
        f"{_get(run, 'machine', 'cores')} shared cores. The parts below took **{total:.0f} s** "
        "together (each part's latest run).\n\n"
        + table(["part", "status", "wall time", "finished (UTC)", "note"], rows)
        + "\n"
    )


#: (start of the line a part gets when its JSON is missing, start of its previous lines).
CARRY_HEADLINES = (
    ("- CTRL+Z test: not measured", "- **CTRL+Z"),
    ("- Aggregation apart from Kafka: not measured", "- **Aggregation apart from Kafka**"),
    ("- Probe send lag / CPU: not measured", "- **Probe**"),
    ("- End-to-end floor: not measured", "- **End-to-end floor**"),
    ("- Stream freshness / memory: not measured", "- **Stream health**"),
    ("- Probe soak: not run", "- **Probe soak**"),
    ("- Scrape cost: not measured", "- **Scrape**"),
)


def carry_headlines(lines: list[str], previous: str) -> list[str]:
    """Headline lines, each not-measured one replaced by the previous report's lines for that
    part (marked as carried over) when it had any."""
    from bench.report_e2e import previous_headline

    out: list[str] = []
    for line in lines:
        old = next((p for new, p in CARRY_HEADLINES if line.startswith(new)), None)
        kept = previous_headline(previous, old) if old and previous else []
        mark = " _(carried over: not rerun)_"
        out += [x if x.endswith(mark) else x + mark for x in kept] or [line]
    return out


def render(results: dict[str, Json], img_dir: Path = IMG_DIR, doc_path: Path = DOC_PATH) -> str:
    """The whole markdown document (plots written to ``img_dir`` as a side effect)."""
    img_dir.mkdir(parents=True, exist_ok=True)
    img_rel = Path("img")
    from bench import report_e2e as rx

    previous = doc_path.read_text() if doc_path.exists() else ""
    prev = rx.previous_sections(previous)

    def missing(title: str, result: str, line: str) -> str:
        """The previous report's section when there is one, else the not-measured line."""
        return rx.carried(prev, title, result) or line

    def not_measured(title: str, part: str) -> str:
        """A section's title and why its part did not run."""
        return f"{title}\n\n_Not measured in this run: {_skip_reason(results, part)}._\n"

    out = [
        "# Benchmarks\n",
        "_Generated by `bench/report.py` from `bench/results/*.json`; do not edit by hand. "
        f"Reproduce with `{COMMAND}` (`--quick` for a smoke run, "
        "`--only accuracy,co,probe,aggregation,e2e,sweep,health,floor,formats,compare,scale,"
        "stages`)._\n",
        "Timing numbers were measured on a small machine shared with other people's builds and "
        "tests while they ran: read them as orders of magnitude, not as a tuned benchmark. The "
        "accuracy numbers are deterministic (seeded).\n",
        "## Headline\n",
        *carry_headlines(headline(results), previous),
        rx.headline_e2e(results.get("e2e")),
        *rx.headline_formats(results.get("echo_formats"), results.get("aggregation_formats")),
        "",
        status_section(results),
    ]
    acc = results.get("accuracy")
    if acc:
        plot_accuracy(acc, img_dir / "accuracy.png")
        out.append(accuracy_section(acc, str(img_rel / "accuracy.png")))
    else:
        out.append(missing("## Accuracy of the high nines", "accuracy", ""))
    co = results.get("co")
    if co and "expected" in co:
        plot_co(co, img_dir / "ctrl_z.png")
        out.append(co_section(co, str(img_rel / "ctrl_z.png")))
    else:
        title = "## Coordinated omission: the CTRL+Z test"
        out.append(missing(title, "co", not_measured(title, "co")))
    agg = results.get("aggregation")
    title = "## Aggregation throughput apart from Kafka"
    if agg:
        out.append(f"{title}\n")
        out.append(aggregation_section(agg))
    else:
        out.append(missing(title, "aggregation", not_measured(title, "aggregation")))
    scale = results.get("scale")
    title = "## The aggregation's cost model (state format 2)"
    if scale:
        out.append(f"{title}\n")
        out.append(scale_section(scale))
    else:
        out.append(missing(title, "scale", not_measured(title, "scale")))
    from bench import report_stages as rs

    stages = results.get("stages")
    if isinstance(stages, Mapping) and (stages.get("cases") or stages.get("levers")):
        out.append(rs.stages_section(dict(stages)))
    else:
        out.append(missing(rs.STAGES_TITLE, "stages", not_measured(rs.STAGES_TITLE, "stages")))
    out.append(
        rs.cost_model_section(
            scale, results.get("e2e"), results.get("stages"), results.get("state_cardinality")
        )
    )
    probe = results.get("probe")
    title = "## Probe: send lag and CPU"
    if probe:
        out.append(f"{title}\n")
        out.append(probe_section(probe))
    else:
        out.append(missing(title, "probe", not_measured(title, "probe")))
    e2e = results.get("e2e")
    if isinstance(e2e, Mapping) and e2e.get("runs"):
        out.append(rx.e2e_section(dict(e2e)))
        sweep = results.get("e2e_sweep")
        if isinstance(sweep, Mapping) and sweep.get("cases"):
            out.append(rx.sweep_section(dict(sweep)))
    else:
        out.append(not_measured(rx.E2E_TITLE, "e2e"))
    floor = results.get("floor")
    if _floor_runs(floor):
        out.append(floor_section(floor))  # type: ignore[arg-type]
    else:
        reason = _skip_reason(results, "floor")
        out.append(missing(FLOOR_TITLE, "floor", f"{FLOOR_TITLE}\n\n_Not measured: {reason}._\n"))
    soak = results.get("soak")
    if isinstance(soak, Mapping) and soak.get("intervals"):
        out.append(soak_section(soak))
    elif SOAK_TITLE in prev:
        out.append(missing(SOAK_TITLE, "soak", ""))
    health = results.get("stream_health")
    if health:
        out.append(health_section(health))
    else:
        out.append(missing(HEALTH_TITLE, "stream_health", not_measured(HEALTH_TITLE, "health")))
    fmts, agg_fmts = results.get("echo_formats"), results.get("aggregation_formats")
    if fmts or agg_fmts:
        out.append(rx.formats_section(fmts, agg_fmts))
    else:
        line = f"{rx.FORMATS_TITLE}\n\n_Not measured: `python -m bench.echo_formats`._\n"
        out.append(missing(rx.FORMATS_TITLE, "echo_formats", line))
    scrape = results.get("cardinality")
    if isinstance(scrape, Mapping) and scrape.get("series"):
        out.append(scrape_section(scrape, results.get("cardinality_before")))
    elif SCRAPE_TITLE in prev:
        out.append(missing(SCRAPE_TITLE, "cardinality", ""))
    out.append("## Four brokers side by side (`nines compare`)\n")
    compare = results.get("compare")
    if isinstance(compare, Mapping) and compare.get("cases"):
        import shutil

        from monitor.compare import markdown

        for case in compare["cases"]:
            plot = RESULTS_DIR / case["plot"]
            if plot.exists():
                shutil.copyfile(plot, img_dir / case["plot"])
        out.append(markdown(dict(compare), str(img_rel)) + "\n")
    else:
        out.append(f"_Not measured in this run: {_skip_reason(results, 'compare')}._\n")
    out.append("## Machines\n")
    out.append(machine_block(results) + "\n")
    text = "\n".join(out)
    doc_path.parent.mkdir(parents=True, exist_ok=True)
    doc_path.write_text(text)
    return text


def main() -> None:
    """Regenerate the document from whatever results exist."""
    render(load_results())
    print(f"wrote {DOC_PATH.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
