"""docs/benchmarks.md's accuracy and coordinated-omission sections, and their plots."""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from bench.report_format import Json, fmt_error, fmt_seconds, qname, table

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
