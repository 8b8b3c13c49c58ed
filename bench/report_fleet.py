"""docs/benchmarks.md's section on the probe fleet's cost per broker (issue 39, part 3), from
bench.fleet_cost's JSON."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from bench.machine import RESULTS_DIR

RESULTS = RESULTS_DIR / "fleet_cost.json"
TITLE = "## The probe fleet's cost per broker"
#: issue 39: the whole fleet under 2 cores at 1,000 brokers and 10 msgs/s per broker, and at
#: most 2 produce requests per broker per tick
FLEET_BROKERS, FLEET_CORES, REQUESTS_PER_TICK = 1000, 2.0, 2.0
#: the CPU one replica may take before it is split (a pod's usual limit is one core)
REPLICA_CORE_BUDGET = 1.0


def load(path: Path = RESULTS) -> dict[str, Any]:
    """The results, or {} when the bench has not run."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) and isinstance(data.get("runs"), dict) else {}


def _ms(e2e: dict[str, int] | None, key: str) -> str:
    return "—" if not e2e else f"{e2e[key] / 1000:,.0f}"


def _parts(r: dict[str, Any]) -> str:
    """Where the p99 went: the probe's send lag and the broker's ack, when measured."""
    lag, pub = r.get("send_lag_us"), r.get("publish_us")
    if not lag or not pub:
        return ""
    return f" (send lag {_ms(lag, 'p99')}, ack {_ms(pub, 'p99')})"


def _settings(r: dict[str, Any]) -> str:
    extra = ", ".join(f"`{k}` {v}" for k, v in (r.get("kafka") or {}).items())
    return r["schedule"] + (f", {extra}" if extra else "")


def _row(r: dict[str, Any], group: str) -> str:
    if "error" in r:
        return (
            f"| {r['lever']} | {r['brokers']:,} | {r['partitions']:,} | 1 | — | — | — | — | — | — "
            f"| — | — | failed: {r['error'][:120]} |"
        )
    e2e = r.get("e2e_us")
    mock = f"{r['mock_core']:.2f}" if "mock_core" in r else "—"
    sent = (r.get("totals") or {}).get("sent", 0)
    judged = (
        f"{group}: one run, fresh mock of {r['brokers']:,} brokers (one process), warm "
        f"({r['measured_s']:g} s after {r['cold']['start_s']:g} s start + 15 s), load "
        f"{r['load_1m'][0]:.0f}→{r['load_1m'][1]:.0f}; {r['threads']:,} threads, "
        f"{r['rss_mib']:,} MiB; sent {sent:,}, lost {r.get('lost', 0):,}"
    )
    return (
        f"| {r['lever']} | {r['brokers']:,} "
        f"| {r['probed_brokers']:,} × {r['partitions_per_broker']:g} "
        f"| 1 | {_settings(r)} | {r['msgs_per_s']:,.0f} | **{r['core']:.3f}** "
        f"({r['core_by_thread']['rdk_broker']:.2f} / {r['core_by_thread']['rdk_other']:.2f} / "
        f"{r['core_by_thread']['python']:.2f}) | {r['core_per_broker'] * 1000:.2f} "
        f"| {r['produce_requests_per_broker_s']['mean']:.1f} "
        f"(max {r['produce_requests_per_broker_s']['max']:.1f}) "
        f"| **{r['produce_requests_per_broker_tick']:.2f}** "
        f"| {r['consumer_requests_per_broker_s']['mean']:.0f} | {mock} "
        f"| {_ms(e2e, 'p50')} / {_ms(e2e, 'p99')} / {_ms(e2e, 'p999')}{_parts(r)} | {judged} |"
    )


def fleet_model(runs: dict[str, list[dict[str, Any]]]) -> dict[str, float] | None:
    """Per-replica fixed cost (knowing every broker) and cost per probed broker at 1,000
    brokers, from the one-probe run (1,000 probed) and the replica run (100 of 1,000 probed)."""
    whole = next((r for r in runs.get("scale", []) if r.get("brokers") == FLEET_BROKERS
                  and "core" in r), None)  # fmt: skip
    part = next((r for r in runs.get("replica", []) if "core" in r), None)
    if whole is None or part is None:
        return None
    per_broker = (whole["core"] - part["core"]) / (whole["probed_brokers"] - part["probed_brokers"])
    fixed = part["core"] - part["probed_brokers"] * per_broker
    return {"per_broker": per_broker, "fixed": fixed, "whole": whole["core"]}


def estimate_rows(model: dict[str, float]) -> list[str]:
    """Replicas × cores at 1,000 brokers, from the linear model (estimates, not runs)."""
    rows = []
    need = 1 + max(0, math.ceil((model["whole"] - REPLICA_CORE_BUDGET) / REPLICA_CORE_BUDGET))
    for replicas in sorted({1, 2, need, 4, 10}):
        per = model["fixed"] + FLEET_BROKERS / replicas * model["per_broker"]
        total = replicas * per
        rows.append(
            f"| estimate | {FLEET_BROKERS:,} | {FLEET_BROKERS // replicas:,} × 1 each | {replicas} "
            f"| staggered | {FLEET_BROKERS * 10:,} | **{total:.2f}** ({per:.2f} per replica) "
            f"| {total / FLEET_BROKERS * 1000:.2f} | as measured | as measured | as measured "
            "| — | — "
            f"| estimate: {replicas} × (fixed {model['fixed']:.3f} + {FLEET_BROKERS // replicas:,} "
            f"× {model['per_broker'] * 1000:.2f} m), the two 1,000-broker runs |"
        )
    return rows


def section(results: dict[str, Any]) -> str:
    """The markdown section (empty input: a line saying how to produce it)."""
    cmd = "`python -m bench.fleet_cost` (part `fleet` of `make bench`)"
    if not results:
        return f"{TITLE}\n\nNot measured yet: {cmd}.\n"
    runs: dict[str, list[dict[str, Any]]] = results["runs"]
    lines = [
        TITLE,
        "",
        f"Measured with {cmd} (issue 39, part 3): for each row a fresh `nines broker --brokers N` "
        "(librdkafka's mock, every broker in one process) and one `python -m monitor probe` at "
        "10 msgs/s per probed broker, 512 B messages (the probe's default), its echo records to a "
        "second, one-broker mock. CPU is the probe process's CPU-seconds per second (utime + "
        "stime from /proc, all threads) over a warm window, split as librdkafka's broker threads "
        "/ its other threads / Python's; requests per broker are the probe's own "
        "`nines_probe_client_requests_total` (librdkafka's `tx`: for the producer, its Produce "
        "requests and a rare Metadata) over the same window; a tick is one message per "
        "partition (1 / rate per partition); latency is end-to-end (`received_us - "
        "intended_us`) of every echo intended in the window, exact nearest rank. The machine was "
        "shared with a 10× timing run of the test suite: the load average (1 min, 2 cores) at "
        "both ends of each window is in its row, and latencies on it are upper bounds.",
        "",
        "| case | brokers | probed brokers × partitions each | replicas | schedule, settings "
        "| msgs/s | cores (rdk broker / rdk other / Python threads) | millicores per probed broker "
        "| produce req/s per broker | produce req per broker per tick | consumer req/s per broker "
        "| mock cores | e2e ms p50 / p99 / p99.9 | what the row judged |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for group in ("scale", "replica", "levers"):
        lines += [_row(r, group) for r in runs.get(group, [])]
    model = fleet_model(runs)
    if model:
        lines += estimate_rows(model)
    lines += ["", *verdict(runs, model), *mock_section(results.get("mock") or [], runs)]
    return "\n".join(lines) + "\n"


def mock_section(mock: list[dict[str, Any]], runs: dict[str, list[dict[str, Any]]]) -> list[str]:
    """How many brokers the mock holds in one process, and what stops it."""
    ok = [m for m in mock if "error" not in m]
    if not ok:
        return []
    lines = [
        "",
        "The mock alone (`python -m bench.fleet_cost --only mock`: a fresh process per size, "
        "`MockCluster(N)` and an N-partition topic, then three leader moves and 5 s idle):",
        "",
        "| brokers | start s (CPU s) | one leader move waits | threads | descriptors "
        "| idle cores | descriptor limit | load |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for m in ok:
        lines.append(
            f"| {m['brokers']:,} | {m['start_s']:g} ({m['start_cpu_s']:g}) "
            f"| {m['set_leader_s']:g} s "
            f"| {m['threads']} | {m['fds']:,} | {m['idle_core']:g} | {m['nofile_limit']:,} "
            f"| {m['load_1m']:.0f} |"
        )
    limit = ok[-1]["nofile_limit"]
    whole = next((r for r in runs.get("scale", []) if r.get("brokers") == FLEET_BROKERS
                  and "fds" in r), None)  # fmt: skip
    lines += [
        "",
        "The mock serves every broker from one thread with one listening socket each, and each "
        "client connection is one more descriptor of that one process, so its limit is the "
        f"process's descriptors ({limit:,} here): a probe's producer and consumer connect to "
        f"every probed broker, so with one probe it holds about {limit // 3:,} brokers "
        "(3 descriptors a broker). Its start grows faster than linearly with N (the table), and "
        "a leader move waits 0.1-0.5 s, so above 64 brokers `nines broker` lets the mock place "
        "one replica per partition itself (partition p on broker p mod N + 1) and caps N at "
        "4,096.",
    ]
    if whole:
        per = whole["fds"] / whole["brokers"]
        lines.append(
            f"The probe is the tighter bound: at {whole['brokers']:,} brokers it held "
            f"{whole['threads']:,} threads and {whole['fds']:,} descriptors ({per:.1f} a broker: "
            "librdkafka keeps a thread and a wake-up pipe per broker in each of its clients), "
            f"so one probe process stops at about {limit / per:,.0f} brokers under a "
            f"{limit:,}-descriptor limit."
        )
    return lines


def verdict(runs: dict[str, list[dict[str, Any]]], model: dict[str, float] | None) -> list[str]:
    """Issue 39's two targets, judged on the 1,000-broker rows."""
    whole = next((r for r in runs.get("scale", []) if r.get("brokers") == FLEET_BROKERS
                  and "core" in r), None)  # fmt: skip
    if whole is None:
        return [f"Targets not judged: no 1,000-broker run in {RESULTS.name}."]
    tick = whole["produce_requests_per_broker_tick"]
    out = [
        f"Targets (issue 39), judged on the 1,000-broker, one-probe row: produce requests per "
        f"broker per tick ≤ {REQUESTS_PER_TICK:g}: **{tick:.2f}, "
        f"{'met' if tick <= REQUESTS_PER_TICK else 'not met'}**; the whole fleet under "
        f"{FLEET_CORES:g} cores: one probe took **{whole['core']:.2f}** cores, "
        f"{'met' if whole['core'] < FLEET_CORES else 'not met'} (load "
        f"{whole['load_1m'][0]:.0f}→{whole['load_1m'][1]:.0f})."
    ]
    if model:
        out.append(
            f"\nThe fleet model from the two 1,000-broker runs: each replica pays "
            f"**{model['fixed']:.3f}** of a core for knowing every broker (librdkafka keeps a "
            f"thread per broker per client, whether it probes that broker or not) plus "
            f"**{model['per_broker'] * 1000:.2f}** millicores per broker it probes; the estimate "
            f"rows above are that model, not runs."
        )
    return out
