"""docs/benchmarks.md's section on the suite's timing-sensitive tests run again and again, from
bench.timing_runs's JSON: how often each file's tests passed, on which commits, at what load."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from statistics import median
from typing import Any

from bench.report_format import read_json, table
from bench.timing_runs import RESULTS, failing

TITLE = "## The suite's timing-sensitive tests, run again and again"


def load(path: Path = RESULTS) -> dict[str, Any]:
    """Each part's tally, or {} when the runs have not been made."""
    data = read_json(path)
    parts = data.get("parts") if isinstance(data, dict) else None
    return parts if isinstance(parts, dict) else {}


def file_of(name: str) -> str:
    """``tests.unit.x.test_y::test_z`` (a junit test's name) → ``tests/unit/x/test_y.py``."""
    return name.split("::")[0].replace(".", "/") + ".py"


def span(values: list[float], fmt: str) -> str:
    """``median (min-max)`` of ``values``, or ``?`` when none were recorded."""
    if not values:
        return "?"
    return f"{median(values):{fmt}} ({min(values):{fmt}}-{max(values):{fmt}})"


def section(parts: dict[str, Any]) -> str:
    """The markdown section (no parts: a line saying how to produce it)."""
    cmd = "`make timing` (= `python -m bench.timing_runs --runs 10`; `--only unit` for one part)"
    if not parts:
        return f"{TITLE}\n\nNot measured yet: {cmd}.\n"
    lines = [
        TITLE,
        "",
        f"Measured with {cmd}: the files of each part run by one pytest, again and again, on a "
        "machine doing nothing else (the load is the 1-min average after each run). A test whose "
        "assertion reads a clock, a CPU counter or a count after a sleep is in the set (issue 41); "
        "one that fails even once is redesigned (a control measured in the same run, a margin "
        "from the measured spread) or moved to `make bench`.",
        "",
    ]
    rows = []
    for key, part in parts.items():
        tests = len(part["tally"])
        sittings = "; ".join(
            f"`{s['git_commit']}` {s['timestamp']} ×{s['runs']}" for s in part.get("sittings", [])
        )
        rows.append(
            [
                key,
                len(part["files"]),
                tests,
                part["runs"],
                f"{tests - len(failing(part))} of {tests}",
                span(part.get("seconds", []), ".0f"),
                span(part["loads"], ".1f"),
                sittings or "?",
            ]
        )
    header = ["part", "files", "tests", "runs", "passed every run", "s a run, median (min-max)"]
    lines.append(table([*header, "load after a run", "sittings (commit, ended, runs)"], rows))
    per_file: dict[str, Counter[str]] = {}
    tests_in: Counter[str] = Counter()
    for part in parts.values():
        for name, counts in part["tally"].items():
            per_file.setdefault(file_of(name), Counter()).update(counts)
            tests_in[file_of(name)] += 1
    lines += ["", "Each file's outcomes, over all its tests and runs:", ""]
    file_rows = [
        [f"`{f}`", tests_in[f], f"{c['passed']} of {sum(c.values())}"] for f, c in per_file.items()
    ]
    lines.append(table(["file", "tests", "passed"], file_rows))
    bad = {n: c for part in parts.values() for n, c in failing(part).items()}
    lines.append("")
    if bad:
        lines.append("Not passed every run:")
        lines += [f"- `{n}`: {', '.join(f'{k} {v}' for k, v in c.items())}" for n, c in bad.items()]
        for f in [f for part in parts.values() for f in part.get("failures", [])]:
            message = " ".join(str(f["message"]).split())
            lines.append(f"  - run {f['run']}, {f['outcome']}: `{message}`")
    else:
        lines.append("Every test passed every run.")
    return "\n".join(lines) + "\n"
