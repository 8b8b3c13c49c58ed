"""docs/benchmarks.md's sections on figures the code cites: its docstrings' and the v1 parse's."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bench.report_format import table

CITED_TITLE = "## Figures the code cites"
PARSE_V1_TITLE = "## Schema-v1 parse: the template parser against the JSON reader"


def cited_section(cited: Mapping[str, Any] | None) -> str:
    """The figures docstrings name by reference (``bench/results/cited.json``)."""
    if not cited or not cited.get("figures"):
        return f"{CITED_TITLE}\n\n_No figures recorded (`bench/results/cited.json`)._\n"
    rows = [[f"`{f['code']}`", f["judged"], f["figure"], f["run"]] for f in cited["figures"]]
    head = ["code", "what it judged", "figure", "run (commit, day)"]
    return f"{CITED_TITLE}\n\n{cited['about']}\n\n{table(head, rows)}\n"


def parse_v1_section(result: Mapping[str, Any] | None) -> str:
    """``python -m bench.parse_v1 --write``: a v1 backlog through the stream's parse path with
    the template parser (the job's path) and without it (Arrow's JSON reader for every echo)."""
    cmd = "`python -m bench.parse_v1 --echoes 1000000 --runs 5 --write`"
    if not result or not result.get("paths"):
        return f"{PARSE_V1_TITLE}\n\n_Not measured: {cmd}._\n"
    paths = result["paths"]
    stages = list(next(iter(paths.values())))
    rows = []
    for name, by_stage in paths.items():
        total = sum(by_stage[s]["median_us"] for s in stages)
        cells = [
            f"{by_stage[s]['median_us']:.2f} ({by_stage[s]['fastest_us']:.2f})" for s in stages
        ]
        rows.append([name, *cells, f"{total:.2f}"])
    job, json_only = paths.get("job"), paths.get("json reader only")
    verdict = ""
    if job and json_only:
        ratio = json_only["parse"]["median_us"] / job["parse"]["median_us"]
        fastest = json_only["parse"]["fastest_us"] / job["parse"]["fastest_us"]
        verdict = (
            f" Without the template parser a v1 echo's parse costs **{ratio:.1f}x** (median; "
            f"{fastest:.1f}x fastest against fastest): far past the 20 % that would justify a "
            "second v1 parser, so `streaming.parse.v1_template` stays (issue 40)."
            if ratio > 1.2
            else f" Without it the parse costs {ratio:.2f}x: not worth a second v1 parser."
        )
    m = result.get("machine", {})
    load = result.get("load", ["?", "?"])
    return (
        f"{PARSE_V1_TITLE}\n\n"
        f"{result['echoes']:,} v1 echoes ({result['bytes_per_echo']} B each, {result['series']} "
        f"series) through the read task's path in fetches of {result['fetch']:,} ({cmd}; "
        f"{result['runs']} runs alternating the two paths; load {load[0]} at start, {load[1]} at "
        f"the end, {m.get('cores', '?')} cores shared, commit {m.get('git_commit', '?')}, "
        f"{m.get('timestamp', '?')}).{verdict} µs per echo, median (fastest); `job` is the "
        "parser as the job runs it (the template), `json reader only` Arrow's JSON reader for "
        "every echo:\n\n"
        f"{table(['path', *stages, 'total'], rows)}\n"
    )
