"""docs/benchmarks.md's section on the probe's send lag under a /metrics flood, from
tests/bench/test_probe_flood_bench.py's JSON."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.machine import RESULTS_DIR
from bench.report_format import read_json, table

RESULTS = RESULTS_DIR / "probe_flood.json"
#: The same bench run on an earlier tree, kept by hand for a before/after (issue 40's split of
#: the /metrics path): its machine facts say which commit it ran.
BEFORE = RESULTS_DIR / "probe_flood_before.json"
TITLE = "## The probe's schedule under a /metrics flood"


def load(path: Path = RESULTS) -> dict[str, Any]:
    """The results, or {} when the bench has not run."""
    data = read_json(path)
    return data if isinstance(data, dict) and isinstance(data.get("cases"), dict) else {}


def section(results: dict[str, Any], before: dict[str, Any] | None = None) -> str:
    """The markdown section (empty input: a line saying how to produce it); with ``before``,
    the earlier tree's medians beside this run's."""
    cmd = "`pytest -m bench tests/bench/test_probe_flood_bench.py` (part `flood` of `make bench`)"
    if not results:
        return f"{TITLE}\n\nNot measured yet: {cmd}.\n"
    target = results.get("target_ratio", 2.0)
    lines = [
        TITLE,
        "",
        f"Measured with {cmd}: a probe (`nines probe`, the mock broker, 300 msgs/s on each of 3 "
        "partitions) scraped every 0.2 s for 3 s healthy, 3 s under 1,100 flooding connections "
        "from 127.0.0.1 (the flood's process at SCHED_IDLE), 3 s healthy again. The ratio is the "
        "flooded send lag's p99.9 over the healthy figure (the worse healthy side, never below "
        "the wake-up floor of an idle process beside the probe during the flood). The target is "
        f"{target:g}x; `make test` asserts only that the flooded p99.9 stays under the 1 s scrape "
        "deadline, since this ratio failed 2x in 3 of 6 runs on a quiet 2-core machine.",
        "",
        "| flood | runs | ratio median (min-max) | over the target | healthy p99.9 ms | "
        "flooded p99.9 ms | probe CPU healthy / flooded (cores) | load |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, case in results["cases"].items():
        runs = case["runs"]
        healthy = ", ".join(f"{r['lag_healthy_ms']:.2f}" for r in runs)
        flooded = ", ".join(f"{r['lag_flood_ms']:.2f}" for r in runs)
        cpu = ", ".join(f"{r['cpu_healthy']:.2f}/{r['cpu_flood']:.2f}" for r in runs)
        load = ", ".join(f"{r['load']:.1f}" for r in runs)
        lines.append(
            f"| {name} | {len(runs)} | {case['ratio_median']:.2f} ({case['ratio_min']:.2f}-"
            f"{case['ratio_max']:.2f}) | {case['over_target']} of {len(runs)} | {healthy} | "
            f"{flooded} | {cpu} | {load} |"
        )
    if before:
        lines += ["", *before_after(before, results)]
    return "\n".join(lines) + "\n"


def before_after(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """Each flood's medians on the earlier tree and on this run's, one row each."""
    from statistics import median

    def commit(r: dict[str, Any]) -> str:
        return str(r.get("machine", {}).get("git_commit", "?"))

    rows = []
    for name in after["cases"]:
        for tree in (before, after):
            case = tree["cases"].get(name)
            if not case:
                continue
            runs = case["runs"]
            keys = ("lag_healthy_ms", "lag_flood_ms", "cpu_healthy", "cpu_flood", "load")
            med = {k: float(median(r[k] for r in runs)) for k in keys}
            rows.append(
                [
                    name,
                    f"`{commit(tree)}`",
                    f"{case['ratio_median']:.2f} ({case['ratio_min']:.2f}-{case['ratio_max']:.2f})",
                    f"{case['over_target']} of {len(runs)}",
                    f"{med['lag_healthy_ms']:.2f} / {med['lag_flood_ms']:.2f}",
                    f"{med['cpu_healthy']:.2f} / {med['cpu_flood']:.2f}",
                    f"{med['load']:.1f}",
                ]
            )
    header = [
        "flood",
        "tree",
        "ratio median (min-max)",
        "over the target",
        "send lag p99.9 healthy / flooded ms",
        "probe CPU healthy / flooded (cores)",
        "load",
    ]
    return [
        f"Before and after: the same bench on `{commit(before)}` (before issue 40's split of the "
        f"/metrics path, run from a worktree of that commit) and on `{commit(after)}`, one after "
        "the other on the same machine; medians of each tree's runs.",
        "",
        table(header, rows),
    ]
