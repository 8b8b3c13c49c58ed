"""Generate ``docs/benchmarks.md`` and its plots from the result JSON files, and nothing else.

No number is typed here: every figure in the markdown is read from ``bench/results/*.json``.
A part whose JSON is missing gets a line saying so (and why, if the runner recorded it). One
module per section (``report_accuracy``, ``report_aggregation``, ``report_probe``,
``report_scrape``, ``report_health``, ``report_e2e``, ``report_stages``, ``report_cited``,
``report_timing`` and more), their shared formatting in ``report_format``; this one puts the
document together.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from bench.machine import RESULTS_DIR
from bench.report_accuracy import (
    accuracy_headline_table,
    accuracy_section,
    co_section,
    plot_accuracy,
    plot_co,
)
from bench.report_aggregation import aggregation_section, scale_section, summarise_aggregation
from bench.report_cited import cited_section, parse_v1_section
from bench.report_fleet import load as load_fleet
from bench.report_fleet import section as fleet_section
from bench.report_flood import BEFORE as FLOOD_BEFORE
from bench.report_flood import load as load_flood
from bench.report_flood import section as flood_section
from bench.report_format import Json, at_path, fmt_error, fmt_seconds, qname, skip_reason, table
from bench.report_health import HEALTH_TITLE, headline_health, health_section
from bench.report_pressure import load as load_pressure
from bench.report_pressure import section as pressure_section
from bench.report_probe import (
    FLOOR_TITLE,
    SOAK_TITLE,
    floor_runs,
    floor_section,
    headline_floor,
    headline_soak,
    probe_section,
    soak_section,
    summarise_probe,
)
from bench.report_scrape import SCRAPE_TITLE, headline_scrape, scrape_section
from bench.report_timing import load as load_timing
from bench.report_timing import section as timing_section
from bench.report_web_protocol import load as load_web_protocol
from bench.report_web_protocol import section as web_protocol_section

ROOT = Path(__file__).resolve().parent.parent
DOC_PATH = ROOT / "docs" / "benchmarks.md"
IMG_DIR = ROOT / "docs" / "img"
COMMAND = "make bench  # = .venv/bin/python -m bench.run"


def load_results(results_dir: Path = RESULTS_DIR) -> dict[str, Json]:
    """Every ``<name>.json`` in the results folder, keyed by name."""
    out: dict[str, Json] = {}
    for path in sorted(results_dir.glob("*.json")):
        try:
            out[path.stem] = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            out[path.stem] = {"unreadable": f"{type(exc).__name__}: {exc}"}
    return out


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
        lines.append(f"- CTRL+Z test: not measured in this run ({skip_reason(results, 'co')}).")
    acc = results.get("accuracy")
    if acc:
        lines.append(
            "- **Accuracy** (relative error at p99.99 / worst |error| over p99 … max):\n\n"
            + accuracy_headline_table(acc)
            + "\n"
        )
    else:
        lines.append(f"- Accuracy: not measured ({skip_reason(results, 'accuracy')}).")
    lines += headline_external(results)
    lines.append(headline_floor(results))
    lines.append(headline_health(results))
    lines.append(headline_soak(results))
    lines.append(headline_scrape(results))
    return lines


def headline_external(results: dict[str, Json]) -> list[str]:
    """Headline lines from the aggregation and probe bench JSON."""
    lines: list[str] = []
    agg = results.get("aggregation")
    if agg:
        lines.append("- **Aggregation apart from Kafka**: " + summarise_aggregation(agg) + ".")
    else:
        lines.append(
            f"- Aggregation apart from Kafka: not measured ({skip_reason(results, 'aggregation')})."
        )
    probe = results.get("probe")
    if probe:
        lines.append("- **Probe**: " + summarise_probe(probe) + ".")
    else:
        lines.append(f"- Probe send lag / CPU: not measured ({skip_reason(results, 'probe')}).")
    return lines


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
        f"{at_path(run, 'machine', 'cores')} shared cores. The parts below took **{total:.0f} s** "
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
        return f"{title}\n\n_Not measured in this run: {skip_reason(results, part)}._\n"

    out = [
        "# Benchmarks\n",
        "_Generated by `bench/report.py` from `bench/results/*.json`; do not edit by hand. "
        f"Reproduce with `{COMMAND}` (`--quick` for a smoke run, "
        "`--only accuracy,co,probe,aggregation,e2e,sweep,health,floor,formats,compare,scale,"
        "stages,pressure,flood,fleet`)._\n",
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
    if floor_runs(floor):
        out.append(floor_section(floor))  # type: ignore[arg-type]
    else:
        reason = skip_reason(results, "floor")
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
    out.append(parse_v1_section(results.get("parse_v1")))
    out.append(pressure_section(load_pressure()))
    out.append(flood_section(load_flood(), load_flood(FLOOD_BEFORE)))
    out.append(web_protocol_section(load_web_protocol()))
    out.append(timing_section(load_timing()))

    out.append(fleet_section(load_fleet()))
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
        out.append(f"_Not measured in this run: {skip_reason(results, 'compare')}._\n")
    out.append(cited_section(results.get("cited")))
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
