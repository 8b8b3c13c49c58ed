"""Report sections for the end-to-end and echo-format benchmarks, and the carry-over of sections
whose result file is not in this checkout (every figure read from JSON, none typed here)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

Json = dict[str, Any]

E2E_TITLE = "## End to end through the broker: v1 and v2 on Apache Kafka"
FORMATS_TITLE = "## Echo format v2 (batched, binary echoes)"
CARRIED = "_Carried over from the previous report"

#: (label, key in the stage breakdown, wall or task seconds) in the order a batch runs them.
STAGES = (
    ("Kafka ListOffsets + tail fetch (driver)", "latest_offset", "wall_s"),
    ("Kafka consume (read tasks)", "kafka_consume", "task_s"),
    ("parse + mark (read tasks)", "parse_mark", "task_s"),
    ("combine (read tasks)", "combine", "task_s"),
    ("Spark aggregation, shuffle, hand-over (executor rest)", "spark_rest", "task_s"),
    ("sink: closed windows, exporter (driver)", "sink", "wall_s"),
    ("other driver work (planning, WAL, commits)", "other_driver", "wall_s"),
)


def _table(header: list[str], rows: list[list[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(str(c) for c in r) + " |" for r in rows])


def _rate(x: Any) -> str:
    return "n/a" if not x else f"{int(x):,}"


#: The master the throughput targets were set on (issues 16 and 24: this 2-core machine).
TARGET_MASTER = "local[2]"


def _verdict(ok: bool) -> str:
    return "**met**" if ok else "**not met**"


def _runs(data: Json) -> dict[str, Json]:
    runs = data.get("runs")
    return {k: dict(r) for k, r in runs.items() if isinstance(r, Mapping)} if runs else {}


def stage_shares(run: Json, cores: int = 2) -> list[tuple[str, float, float]]:
    """(stage, seconds, share of the batch time) for one run: task seconds count 1/cores (the
    read tasks and the aggregation run on every core at once)."""
    stages = run.get("stages") or {}
    total = float(dig(stages, "wall_s", "batches") or 0)
    out = []
    for label, key, kind in STAGES:
        s = float(dig(stages, kind, key) or 0)
        wall = s / cores if kind == "task_s" else s
        out.append((label, wall, wall / total if total else 0.0))
    return out


def dig(data: Any, *path: str) -> Any:
    """``data[path[0]][path[1]]...``, or None where a step is missing or not a mapping."""
    for p in path:
        if not isinstance(data, Mapping) or p not in data:
            return None
        data = data[p]
    return data


def _cores(run: Json) -> int:
    master = str(run.get("master") or "local[2]")
    return int(master.removeprefix("local[").removesuffix("]")) if "local[" in master else 2


def scaling(data: Json) -> dict[str, float]:
    """local[2] / local[1] echoes/s per (engine, format), from the runs themselves."""
    runs = _runs(data)
    out = {}
    for key, two in runs.items():
        if "local[2]" not in key or not two.get("echoes_per_s"):
            continue
        one = runs.get(key.replace("local[2]", "local[1]")) or {}
        if one.get("echoes_per_s"):
            out[f"{two.get('engine')} {two.get('echo_format')}"] = round(
                two["echoes_per_s"] / one["echoes_per_s"], 2
            )
    return out


def judged_runs(data: Json) -> dict[str, Json]:
    """The runs the throughput targets judge: those on ``TARGET_MASTER``, as the issues set them
    (a local[1] run is measured for the scaling, not judged against them)."""
    return {
        key: r
        for key, r in _runs(data).items()
        if r.get("echoes_per_s") and str(r.get("master") or TARGET_MASTER) == TARGET_MASTER
    }


def e2e_targets(data: Json) -> dict[str, bool]:
    """Each target of issues 16 and 24 for the end-to-end runs: one verdict per run it judges,
    named with the run and its figure, so a verdict never stands for runs it does not show."""
    runs = judged_runs(data)
    targets = data.get("targets_echoes_per_s") or {}
    ratio = float(data.get("target_vs_hdrh_loop") or 10)
    out = {}
    for fmt, target in targets.items():
        mine = {k: r for k, r in runs.items() if r.get("echo_format") == fmt}
        head = f"{fmt} ≥ {int(target):,}/s on {TARGET_MASTER}"
        if not mine:
            out[f"{head} (no such run)"] = False  # none measured is not met
        for key, r in mine.items():
            out[f"{head} ({key}: {_rate(r['echoes_per_s'])}/s)"] = r["echoes_per_s"] >= target
    for key, r in runs.items():
        times = float(r.get("vs_hdrh_loop") or 0)
        out[f"≥ {ratio:g}× the loop ({key}: {times:g}×)"] = times >= ratio
    ratios = scaling(data) or data.get("scaling_local2_over_local1") or {}
    if isinstance(ratios, Mapping):
        want = float(data.get("target_scaling") or 1.8)
        for key, v in ratios.items():
            out[f"local[2] / local[1] ≥ {want:g} ({key}: {float(v):g}×)"] = float(v) >= want
    return out


def headline_e2e(data: Json | None) -> str:
    """One line: echoes/s per broker and format, ratios to the loop, targets, the largest stage."""
    runs = _runs(data or {})
    if not runs:
        return "- End to end through the broker: not measured (`python -m bench.e2e`)."
    assert data is not None
    parts = []
    for key, r in runs.items():
        if "error" in r:
            parts.append(f"{key} **failed**")
            continue
        parts.append(
            f"{key} **{_rate(r.get('echoes_per_s'))}/s** ({r.get('vs_hdrh_loop', '?')}× the loop)"
        )
    loop = _rate(dig(data, "hdrh_python_loop", "echoes_per_s"))
    targets = "; ".join(f"{k}: {_verdict(v)}" for k, v in e2e_targets(data).items())
    worst = [
        (key, max(stage_shares(r, _cores(r)), key=lambda s: s[2]))
        for key, r in runs.items()
        if r.get("stages") and "error" not in r
    ]
    where = ", ".join(f"{key} {s[0].split(' (')[0]} {s[2] * 100:.0f} %" for key, s in worst)
    ratios = scaling(data) or data.get("scaling_local2_over_local1") or {}
    if isinstance(ratios, Mapping) and ratios:
        parts.append("local[2] / local[1] " + ", ".join(f"{k} {v}×" for k, v in ratios.items()))
    sizes = data.get("sizes") or {}
    per_run = (
        ", ".join(f"{k} {v.get('batch_echoes', 0):,} echoes a batch" for k, v in sizes.items())
        if isinstance(sizes, Mapping) and sizes
        else f"{data.get('echoes', 0):,} echoes per run"
    )
    return (
        f"- **End to end through the broker** ({per_run}; steady batches): "
        + ", ".join(parts)
        + f"; pure-Python hdrh loop {loop}/s; targets {targets}"
        + (f"; the largest stage: {where}" if where else "")
        + "."
    )


def e2e_section(data: Json) -> str:
    """One row per (broker, format) run, the stage breakdown per run, the baseline."""
    runs = _runs(data)
    quick = ", **quick mode**" if data.get("quick") else ""
    rows, stage_rows = [], []
    for key, r in runs.items():
        if "error" in r:
            rows.append([key, f"**failed**: {r['error']}", *[""] * 10])
            continue
        rows.append(
            [
                key,
                f"**{_rate(r.get('echoes_per_s'))}**",
                f"{r.get('steady_batches', '?')} × {_rate(r.get('batch_echoes'))}",
                _rate(r.get("all_batches_echoes_per_s")),
                _rate(r.get("wall_echoes_per_s")),
                f"{r.get('vs_hdrh_loop', '?')}× ({r.get('vs_hdrh_loop_incl_decode', '?')}×)",
                f"{r.get('kafka_messages', 0):,} ({r.get('bytes_per_echo', '?')} B/echo)",
                ", ".join(f"{b:g}" for b in r.get("batch_s", [])),
                f"{r.get('produce_s', '?')} s",
                f"{r.get('broker_cpu_pct_of_core', '?')} %",
                f"{r.get('max_state_rows', 0):,}",
                str(r.get("load_avg_1m_end", "?")),
            ]
        )
        shares = stage_shares(r, _cores(r))
        stage_rows.append(
            [
                key,
                f"{dig(r, 'stages', 'wall_s', 'batches')} s",
                *[f"{s:.2f} s ({share * 100:.0f} %)" for _, s, share in shares],
            ]
        )
    loop = data.get("hdrh_python_loop") or {}
    decode = data.get("reference_decode_echoes_per_s") or {}
    targets = e2e_targets(data)
    intro = (
        f"From `bench/results/e2e.json` (`{data.get('command', 'python -m bench.e2e')}`, part "
        f"`e2e` of `bench.run`{quick}). {data.get('setup', '')}\n\n"
        "Columns: echoes/s over the steady batches (the headline figure, issue 24's rules: the "
        "full batches after the query's first), how many of how many echoes, echoes/s over all "
        "the measured query's batches (the first and the closing one included) and over the "
        "wall time from the query's start to the last window out; the ratio to the pure-Python "
        "hdrh loop (in "
        "brackets: to the loop plus the reference decoder of that format); Kafka messages and "
        "bytes per echo; each batch's time; the time to produce the echoes beforehand; the "
        "broker's CPU while the job read.\n"
    )
    header = [
        "run",
        "echoes/s",
        "steady batches",
        "all batches",
        "on wall time",
        "vs hdrh loop",
        "Kafka messages",
        "batch times (s)",
        "produce",
        "broker CPU",
        "state rows",
        "load",
    ]
    stage_header = ["run", "batch time", *[label for label, _, _ in STAGES]]
    baseline = (
        f"Baseline in the same run: the pure-Python `hdrh` loop recorded "
        f"{loop.get('echoes', 0):,} echoes ({loop.get('record_calls_per_echo', '?')} "
        f"`record_value` calls each, no decoding) at **{_rate(loop.get('echoes_per_s'))} "
        f"echoes/s** (the faster of a run before and after the four: "
        + ", ".join(_rate(x) for x in loop.get("echoes_per_s_before_after", []))
        + "). The reference decoders on one core: "
        + ", ".join(f"{fmt} {_rate(v)} echoes/s" for fmt, v in decode.items())
        + ".\n"
    )
    verdict = (
        "Targets on this 2-core machine: "
        + "; ".join(f"{k}: {_verdict(v)}" for k, v in targets.items())
        + ".\n"
    )
    stages_intro = (
        "**Where the time goes**, per run, summed over its batches. Driver stages are wall "
        "seconds; the read tasks' stages (timed inside `read()` by `bench.e2e.TimedKafkaReader`: "
        "time in `consume()`, then parsing and marking, then the combiner) and the rest of the "
        "executors' work are task seconds divided by the 2 cores (both run at once), so each "
        "share is of the batch time. The executor rest is the execution's task seconds "
        "(`df.toArrow()` in the sink × the cores) not spent in the reader: Spark's aggregation and "
        "state, the shuffle, the Arrow hand-over from the Python reader to the JVM, "
        "scheduling and idle cores.\n"
    )
    state = [
        f"- {key}: state update {dig(r, 'stages', 'task_s', 'state_update')} s, removal "
        f"{dig(r, 'stages', 'task_s', 'state_removal')} s, commit "
        f"{dig(r, 'stages', 'task_s', 'state_commit')} s (task seconds); "
        f"{dig(r, 'stages', 'records_read') or 0:,} echoes (the closing one included) read into "
        f"{dig(r, 'stages', 'partials') or 0:,} partial-histogram rows by "
        f"{dig(r, 'stages', 'read_tasks')} read tasks"
        for key, r in runs.items()
        if r.get("stages")
    ]
    return (
        f"{E2E_TITLE}\n\n{intro}\n{_table(header, rows)}\n\n{baseline}\n{verdict}\n"
        f"{stages_intro}\n{_table(stage_header, stage_rows)}\n\n"
        "Spark's own state-operator timers (inside the executor rest):\n\n"
        + "\n".join(state)
        + "\n"
    )


SWEEP_TITLE = "### Echoes/s by micro-batch size (the combiner's lever)"


def sweep_section(data: Json) -> str:
    """One row per (format, batch size): echoes/s, partials per echo, the state, the loop ratio."""
    quick = ", **quick mode**" if data.get("quick") else ""
    rows = []
    for c in data.get("cases") or []:
        label = f"{c.get('echo_format')} {c.get('echoes', 0):,}"
        if "error" in c:
            rows.append([label, f"{c.get('batch_echoes', 0):,}", f"**failed**: {c['error']}"])
            continue
        partials = dig(c, "stages", "partials") or 0
        loop = c.get("hdrh_loop_echoes_per_s")
        ratio = f"{c['echoes_per_s'] / loop:.2f}×" if loop and c.get("echoes_per_s") else "?"
        rows.append(
            [
                label,
                f"{c.get('batch_echoes', 0):,}",
                f"**{_rate(c.get('echoes_per_s'))}**",
                _rate(c.get("steady_echoes_per_s")),
                ratio,
                f"{c.get('batches', '?')}",
                f"{partials:,} ({partials / max(1, c.get('echoes', 1)):.3f})",
                f"{c.get('max_state_rows', 0):,}",
            ]
        )
    header = [
        "format, echoes",
        "echoes per batch",
        "echoes/s",
        "steady",
        "vs hdrh loop",
        "batches",
        "partials (per echo)",
        "state rows",
    ]
    return (
        f"{SWEEP_TITLE}\n\nFrom `bench/results/e2e_sweep.json` (`{data.get('command')}`, part "
        f"`sweep` of `bench.run`{quick}). {data.get('setup', '')}\n\n"
        f"{_table(header, rows)}\n\n"
        "The partials column is what Spark aggregates: without the combiner it would be 9 rows "
        "per echo (3 kinds × 3 windows). A larger batch merges more echoes into each partial, "
        "so the cost per echo falls; the bound is the distinct (window, series, kind, bucket) "
        "keys the echoes of a batch touch.\n"
    )


# --- echo formats ---------------------------------------------------------------------------


def headline_formats(fmts: Json | None, agg: Json | None) -> list[str]:
    """Lines for the codec, aggregation apart from Kafka per format, and the probe's CPU."""
    lines = []
    codec = dig(fmts, "codec")
    if isinstance(codec, Mapping):
        lines.append(
            "- **Echo formats** (one core): job parse "
            + ", ".join(
                f"{k} {_rate(v.get('parse_echoes_per_s'))} echoes/s"
                for k, v in codec.items()
                if isinstance(v, Mapping)
            )
            + "."
        )
    runs = dig(agg, "runs")
    if isinstance(runs, Mapping):
        target = int((agg or {}).get("target_v2_echoes_per_s") or 0)
        v2 = dig(runs, "v2", "echoes_per_s") or 0
        lines.append(
            "- **Aggregation apart from Kafka by format** (local[2]): "
            + ", ".join(
                f"{k} {_rate(r.get('echoes_per_s'))} echoes/s"
                for k, r in runs.items()
                if isinstance(r, Mapping) and "echoes_per_s" in r
            )
            + (f"; target v2 ≥ {target:,}/s {_verdict(v2 >= target)}" if target else "")
            + "."
        )
    probe = dig(fmts, "probe_1000_per_s")
    if isinstance(probe, Mapping) and probe.get("mean_cpu_pct_of_core"):
        cpu_target = probe.get("target_cpu_pct_of_core")
        means = probe["mean_cpu_pct_of_core"]
        ok = cpu_target is not None and means.get("v2") is not None and means["v2"] <= cpu_target
        lines.append(
            "- **Probe CPU at 1,000 msgs/s**: "
            + ", ".join(f"{k} {v} %" for k, v in means.items())
            + f" of a core (mean of {len(probe.get('runs', []))} runs); "
            + f"target v2 ≤ {cpu_target} %: "
            + _verdict(ok)
            + "."
        )
    return lines


def formats_section(fmts: Json | None, agg: Json | None) -> str:
    """Bytes/encode/parse per format, aggregation apart from Kafka per format, probe CPU."""
    out = [
        f"{FORMATS_TITLE}\n",
        "Reproduce: `python -m bench.echo_formats` (codec and probe CPU; `--quick` for a smoke "
        "run) and `python -m bench.aggregation --formats` (parsing and aggregation apart from "
        "Kafka). End to end through the broker per format: the section above.\n",
    ]
    codec = dig(fmts, "codec")
    if isinstance(codec, Mapping):
        rows = [
            [
                k,
                c.get("bytes_per_echo"),
                c.get("zlib1_bytes_per_echo"),
                f"{c.get('encode_us_per_echo', 0):.2f} µs",
                f"{c.get('kafka_messages_per_echo', 0):g}",
                _rate(c.get("parse_echoes_per_s")),
            ]
            for k, c in codec.items()
            if isinstance(c, Mapping)
        ]
        out.append(
            f"**Bytes, encode and parse** (`bench/results/echo_formats.json`, codec part; "
            f"{codec.get('echoes', 0):,} seeded echoes of `bench.aggregation.generate`; parse = "
            "`streaming.parse.parse_messages` on fetches of 10,000 Kafka values, one core, best "
            "of several):\n\n"
            + _table(
                [
                    "format",
                    "bytes per echo",
                    "after zlib-1 of 100 echoes",
                    "probe encode per echo",
                    "Kafka messages per echo",
                    "job parse, echoes/s on one core",
                ],
                rows,
            )
            + "\n"
        )
    runs = dig(agg, "runs")
    if isinstance(runs, Mapping):
        rows = [
            [
                k,
                f"**{_rate(r.get('echoes_per_s'))}**",
                f"{r.get('rows_per_batch', 0):,}",
                ", ".join(f"{b:g}" for b in r.get("batch_busy_s", [])),
                f"{r.get('e2e_samples_counted', 0):,}",
                f"{dig(runs, 'bytes_per_echo', k) or '—'}",
            ]
            for k, r in runs.items()
            if isinstance(r, Mapping) and "echoes_per_s" in r
        ]
        load = dig(agg, "machine", "load_avg_1m")
        out.append(
            f"**Parsing and aggregation apart from Kafka** (`bench/results/"
            f"aggregation_formats.json`, `python -m bench.aggregation --formats`; load 1m "
            f"{load} at the end). {(agg or {}).get('setup', '')}\n\n"
            + _table(
                [
                    "replayed as",
                    "echoes/s (steady)",
                    "Kafka values per batch",
                    "batch times (s)",
                    "e2e samples out",
                    "bytes per echo",
                ],
                rows,
            )
            + "\n"
        )
    probe = dig(fmts, "probe_1000_per_s")
    if isinstance(probe, Mapping) and probe.get("runs"):
        rows = [
            [
                i + 1,
                r.get("echo_format"),
                r.get("cpu_pct_of_core"),
                dig(r, "cpu_pct_by_thread", "nines-receive"),
                f"{r.get('echo_messages', 0):,}",
                r.get("echoes_per_message"),
                "yes" if r.get("every_echo_once") else "**no**",
                r.get("load_1m_at_start"),
            ]
            for i, r in enumerate(probe["runs"])
        ]
        means = probe.get("mean_cpu_pct_of_core") or {}
        target = probe.get("target_cpu_pct_of_core")
        out.append(
            "**The probe's CPU at 1,000 msgs/s** (`bench/results/echo_formats.json`, probe "
            "part: one `nines probe` process per format and round at 1,000 msgs/s in total over "
            "3 partitions of 1 KiB against a fresh embedded broker; utime + stime of the probe "
            "over the measured interval after a warm-up; afterwards every echo is read back from "
            "the echo topic, each exactly once):\n\n"
            + _table(
                [
                    "run",
                    "format",
                    "CPU (% of a core)",
                    "`nines-receive` thread",
                    "echo Kafka messages",
                    "echoes per message",
                    "every echo once",
                    "load 1m",
                ],
                rows,
            )
            + "\n\nMean: "
            + ", ".join(f"{k} {v} %" for k, v in means.items())
            + f" of a core; target ≤ {target} % with v2: "
            + _verdict(target is not None and (means.get("v2") or 1e9) <= target)
            + ". The `nines-receive` thread encodes and produces the echoes; the rest of the "
            "probe's CPU (its sender, the clients' librdkafka threads, acks, the hiccup meter) "
            "is probing itself and does not depend on the echo format.\n"
        )
    return "\n".join(out)


# --- carrying over sections whose JSON is not here ------------------------------------------


def previous_sections(text: str) -> dict[str, str]:
    """``## title`` → that section's text (title line included) of a previous report."""
    out: dict[str, str] = {}
    for chunk in re.split(r"(?m)^(?=## )", text):
        if chunk.startswith("## "):
            out[chunk.splitlines()[0].strip()] = chunk.rstrip() + "\n"
    return out


def carried(previous: Mapping[str, str], title: str, result: str) -> str | None:
    """The previous report's section ``title`` marked as carried over (once), or None when it
    had none or it said only that nothing was measured."""
    old = previous.get(title)
    if not old:
        return None
    body = old.split("\n", 1)[1] if "\n" in old else ""
    if not body.strip() or body.strip().startswith("_Not measured"):
        return None
    if CARRIED not in body:
        body = (
            f"\n{CARRIED}: `bench/results/{result}.json` is not in this checkout, so these "
            "figures were not regenerated; rerun the part to replace them._\n" + body
        )
    return f"{title}\n{body}"


def previous_headline(text: str, prefix: str) -> list[str]:
    """The previous report's headline lines that start with ``prefix`` (e.g. ``- **Probe**``)."""
    head = previous_sections(text).get("## Headline", "")
    return [line for line in head.splitlines() if line.startswith(prefix)]
