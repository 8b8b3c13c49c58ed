"""Accuracy of the high nines: nines' merged HDR histograms vs the naive ways, on known traces.

Pure numpy. For each dataset the truth is the exact nearest-rank quantile over all samples; each
method's reading is scored by its relative error. Writes ``bench/results/accuracy.json``.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

from bench.datasets import GENERATORS
from bench.machine import RESULTS_DIR, write_result
from bench.methods import METHODS, STUDY_QUANTILES, exact_quantiles

WINDOWS = 60
WINDOW_S = 10.0
SAMPLES = 1_200_000
QUICK_SAMPLES = 240_000
SEED = 20260522


def relative_error(estimate: float, exact: float) -> float:
    """Signed (estimate − exact) / exact; ``inf``/``nan`` readings stay visible as such."""
    if math.isnan(estimate):
        return math.nan
    if exact == 0:
        return 0.0 if estimate == 0 else math.inf
    return (estimate - exact) / exact


def _json_float(x: float) -> float | str:
    """JSON has no inf/nan: spell them out so the report can show them."""
    return x if math.isfinite(x) else str(x)


def run_accuracy(quick: bool = False, results_dir: Path = RESULTS_DIR) -> dict[str, Any]:
    """Score every method on every dataset and write the result JSON."""
    n = QUICK_SAMPLES if quick else SAMPLES
    started = time.perf_counter()
    datasets: list[dict[str, Any]] = []
    for i, (name, gen) in enumerate(GENERATORS.items()):
        ds = gen(n, WINDOWS, WINDOW_S, SEED + i)
        exact = exact_quantiles(ds.all_us())
        methods: dict[str, Any] = {}
        for key, (label, fn) in METHODS.items():
            t0 = time.perf_counter()
            reading = fn(ds.windows)
            methods[key] = {
                "label": label,
                "seconds": round(time.perf_counter() - t0, 3),
                "value_s": {str(q): _json_float(reading[q]) for q in STUDY_QUANTILES},
                "rel_error": {
                    str(q): _json_float(relative_error(reading[q], exact[q]))
                    for q in STUDY_QUANTILES
                },
            }
        datasets.append(
            {
                "name": name,
                "description": ds.description,
                "samples": ds.samples,
                "windows": len(ds.windows),
                "window_s": WINDOW_S,
                "exact_s": {str(q): exact[q] for q in STUDY_QUANTILES},
                "methods": methods,
            }
        )
    payload = {
        "benchmark": "accuracy",
        "quick": quick,
        "seed": SEED,
        "quantiles": [str(q) for q in STUDY_QUANTILES],
        "datasets": datasets,
        "wall_s": round(time.perf_counter() - started, 2),
    }
    write_result("accuracy", payload, results_dir)
    return payload


if __name__ == "__main__":
    import json

    print(json.dumps(run_accuracy(quick=True), indent=1)[:4000])
