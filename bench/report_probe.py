"""docs/benchmarks.md's probe sections: send lag and CPU, the end-to-end floor, the soak."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bench.report_format import (
    Json,
    at_path,
    flatten,
    fmt_seconds,
    generic_table,
    skip_reason,
    table,
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
            f"**{_us(at_path(r, 'send_lag_us', 'p999'))}**, "
            f"CPU **{_pct(r.get('cpu_pct_of_core'))}** of a core"
        )
        if rate == target_rate:
            text += (
                f" (targets ≤ {_us(targets.get('send_lag_p999_us'))}, "
                f"≤ {_pct(targets.get('cpu_pct_of_core'))}: {_met(at_path(probe, 'met', 'all'))})"
            )
        parts.append(text)
    floor = rates.get(target_rate) or next(iter(rates.values()))
    parts.append(
        f"end-to-end floor on the embedded broker p50 {_us(at_path(floor, 'e2e_us', 'p50'))}, "
        f"p99.9 {_us(at_path(floor, 'e2e_us', 'p999'))}"
    )
    for r in rates.values():
        if not _is_default(r):
            parts.append(
                f"with {_settings_text(r)} p50 "
                f"{_us(at_path(r, 'e2e_us', 'p50'))}, p99.9 {_us(at_path(r, 'e2e_us', 'p999'))}"
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
            f"{_met(at_path(probe, 'met', 'all'))}."
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


def floor_runs(data: Json | None) -> dict[str, Json]:
    runs = at_path(data, "runs")
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
    runs = {k: r for k, r in floor_runs(results.get("floor")).items() if _is_default(r)}
    if not runs:
        return f"- End-to-end floor: not measured ({skip_reason(results, 'floor')})."
    parts = [
        f"{_broker_label(key, r)} p50 **{_us(at_path(r, 'e2e_us', 'p50'))}**, "
        f"p99.9 {_us(at_path(r, 'e2e_us', 'p999'))}, max {_us(at_path(r, 'e2e_us', 'max'))}"
        if r.get("e2e_us")
        else f"{_broker_label(key, r)} failed ({r.get('error', 'no echoes')})"
        for key, r in runs.items()
    ]
    rate = next(iter(runs.values())).get("rate_total_per_s", "?")
    return f"- **End-to-end floor** at {rate:,} msgs/s, one run: " + "; ".join(parts) + "."


def floor_section(data: Json) -> str:
    """One row per engine and setting: echoes, e2e p50/p99/p99.9/max, publish, send lag."""
    runs = floor_runs(data)
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
                f"{_us(at_path(r, 'publish_us', 'p50'))} / {_us(at_path(r, 'publish_us', 'p999'))}",
                _us(at_path(r, "send_lag_us", "p999")),
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
