"""docs/benchmarks.md's section on the probe fleet's cost per broker (issue 39, part 3), from
bench.fleet_cost's JSON."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.machine import RESULTS_DIR
from bench.report_format import read_json

RESULTS = RESULTS_DIR / "fleet_cost.json"
TITLE = "## The probe fleet's cost per broker"
#: issue 39: the whole fleet under 2 cores at 1,000 brokers and 10 msgs/s per broker, and at
#: most 2 produce requests per broker per tick
FLEET_BROKERS, FLEET_CORES, REQUESTS_PER_TICK = 1000, 2.0, 2.0
#: the CPU one replica may take before it is split (a pod's usual limit is one core)
REPLICA_CORE_BUDGET = 1.0


def load(path: Path = RESULTS) -> dict[str, Any]:
    """The results, or {} when the bench has not run."""
    data = read_json(path)
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


def kept_schedule(r: dict[str, Any]) -> bool:
    """The probe kept up in the window: echoes of at least 95 % of what its schedule asked,
    and at most 1 % of them lost (read back after the loss timeout, or never)."""
    if "error" in r:
        return False
    echoes = r.get("echoes", 0)
    return echoes >= 0.95 * r["msgs_per_s"] * r["measured_s"] and r.get("lost", 0) <= 0.01 * echoes


def fleet_model(runs: dict[str, list[dict[str, Any]]]) -> dict[str, float] | None:
    """core = base + known × per_known + probed × per_probed, solved (least squares) over the
    baseline rows that kept their schedule: what a replica costs for every broker its clients
    know from metadata, and for every broker it probes."""
    import numpy as np

    rows = [
        r
        for g in ("scale", "replica")
        for r in runs.get(g, [])
        if kept_schedule(r) and not r.get("kafka") and r.get("schedule") == "staggered"
        and r.get("partitions_per_broker") == 1
    ]  # fmt: skip
    if len({(r["brokers"], r["probed_brokers"]) for r in rows}) < 3:
        return None
    a = np.array([[1.0, r["brokers"], r["probed_brokers"]] for r in rows])
    b = np.array([r["core"] for r in rows])
    (base, per_known, per_probed), *_ = np.linalg.lstsq(a, b, rcond=None)
    return {"base": float(base), "per_known": float(per_known),
            "per_probed": float(per_probed), "rows": len(rows)}  # fmt: skip


def replica_core(model: dict[str, float], replicas: int) -> float:
    """One replica's cores at FLEET_BROKERS brokers: it knows them all, probes its share."""
    share = FLEET_BROKERS / replicas
    return model["base"] + FLEET_BROKERS * model["per_known"] + share * model["per_probed"]


def replicas_needed(model: dict[str, float]) -> int:
    """Fewest replicas with each at most REPLICA_CORE_BUDGET (0 if none would do)."""
    return next((n for n in range(1, 101) if replica_core(model, n) <= REPLICA_CORE_BUDGET), 0)


def estimate_rows(model: dict[str, float]) -> list[str]:
    """Replicas × cores at 1,000 brokers, from the linear model (estimates, not runs)."""
    rows = []
    for replicas in sorted({1, 2, 4, 10, replicas_needed(model)} - {0}):
        per = replica_core(model, replicas)
        total = replicas * per
        share = FLEET_BROKERS // replicas
        rows.append(
            f"| estimate | {FLEET_BROKERS:,} | {share:,} × 1 each | {replicas} "
            f"| staggered | {FLEET_BROKERS * 10:,} | **{total:.2f}** ({per:.2f} per replica) "
            f"| {total / FLEET_BROKERS * 1000:.2f} | — | — | — | — | — "
            f"| estimate, not a run: {replicas} × ({model['base']:.3f} + {FLEET_BROKERS:,} known "
            f"× {model['per_known'] * 1000:.2f} m + {share:,} probed "
            f"× {model['per_probed'] * 1000:.2f} m) |"
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
    lines += ["", *verdict(runs, model), *lever_lines(runs)]
    lines += mock_section(results.get("mock") or [], runs)
    return "\n".join(lines) + "\n"


def _load(r: dict[str, Any]) -> float:
    return float(sum(r.get("load_1m") or [0.0]) / max(1, len(r.get("load_1m") or [0.0])))


def plain(r: dict[str, Any]) -> bool:
    """A row with the probe's defaults: staggered, no client settings."""
    return "error" not in r and r.get("schedule") == "staggered" and not r.get("kafka")


def reference(
    r: dict[str, Any], runs: dict[str, list[dict[str, Any]]], per_broker: float | None = None
) -> dict[str, Any] | None:
    """The row a lever is read against: the same brokers, ``per_broker`` partitions each (the
    lever's own by default), the probe's defaults, and of those the run whose machine load was
    closest to the lever's (the load moves CPU and latency more than most levers do)."""
    want = r.get("partitions_per_broker") if per_broker is None else per_broker
    found = [
        x
        for g in ("levers", "scale")
        for x in runs.get(g, [])
        if x is not r and plain(x) and x.get("brokers") == r["brokers"]
        and x.get("probed_brokers") == r.get("probed_brokers")
        and x.get("partitions_per_broker") == want
    ]  # fmt: skip
    return min(found, key=lambda x: abs(_load(x) - _load(r))) if found else None


def lever_lines(runs: dict[str, list[dict[str, Any]]]) -> list[str]:
    """Each lever against its reference row: requests per tick, cores, and latency."""
    pairs = []
    for r in runs.get("levers", []):
        if plain(r) and r.get("partitions_per_broker", 1) > 1:  # fewer partitions: 1 against k
            one = reference(r, runs, per_broker=1.0)
            if one is not None:
                label = f"1 partition per broker instead of {r['partitions_per_broker']:g}"
                pairs.append(({**one, "lever": label}, r))
        elif not plain(r) and (ref := reference(r, runs)) is not None:
            pairs.append((r, ref))
    rows = []
    for r, ref in pairs:
        if "error" in r or "error" in ref:
            continue

        def p99(x: dict[str, Any], key: str) -> str:
            return _ms(x.get(key), "p99")

        rows.append(
            f"| {r['lever']} | {ref['lever']} | {ref['produce_requests_per_broker_tick']:.2f} → "
            f"**{r['produce_requests_per_broker_tick']:.2f}** "
            f"| {ref['consumer_requests_per_broker_s']['mean']:.0f} → "
            f"{r['consumer_requests_per_broker_s']['mean']:.0f} | {ref['core']:.3f} → "
            f"{r['core']:.3f} | {p99(ref, 'e2e_us')} → **{p99(r, 'e2e_us')}** | "
            f"{p99(ref, 'publish_us')} → {p99(r, 'publish_us')} | "
            f"{p99(ref, 'send_lag_us')} → {p99(r, 'send_lag_us')} | "
            f"{ref['load_1m'][0]:.0f} / {r['load_1m'][0]:.0f} |"
        )
    if not rows:
        return []
    return [
        "",
        "The levers, each against the row it changes (same brokers and partitions, staggered, "
        "default settings; one run each, so a difference smaller than the load's swing between "
        "the two runs is noise). Latencies in ms at p99: end to end, then its parts the lever "
        "moves: sent to acked (where `linger.ms` shows) and the probe's send lag (where the "
        "machine's load shows).",
        "",
        "| lever | against | produce req per broker per tick | consumer req/s per broker | cores "
        "| e2e p99 | ack p99 | send lag p99 | load (1 min): against / lever |",
        "|---|---|---|---|---|---|---|---|---|",
        *rows,
        *fetch_note(runs),
    ]


def fetch_note(runs: dict[str, list[dict[str, Any]]]) -> list[str]:
    """What the consumer's fetch wait does to the cost, from its lever row, if measured."""
    r = next((x for x in runs.get("levers", []) if "fetch.wait.max.ms" in (x.get("kafka") or {})
              and "error" not in x), None)  # fmt: skip
    ref = reference(r, runs) if r else None
    if r is None or ref is None:
        return []
    wait = r["kafka"]["fetch.wait.max.ms"]
    return [
        "",
        f"The lever that moves the cost per broker is not in the issue's list: the consumer's "
        f"`fetch.wait.max.ms` {wait} (the probe's `kafka` settings; default 10) cut its requests "
        f"per broker from {ref['consumer_requests_per_broker_s']['mean']:.0f} to "
        f"{r['consumer_requests_per_broker_s']['mean']:.0f} a second and the probe's CPU from "
        f"{ref['core']:.3f} to {r['core']:.3f} cores at 100 brokers. Its latency price here is "
        f"the mock's (e2e p50 {_ms(ref.get('e2e_us'), 'p50')} → {_ms(r.get('e2e_us'), 'p50')} "
        "ms): the mock parks every fetch for the whole wait, while Apache Kafka answers a fetch "
        'as soon as a record arrives (docs/configuration.md, "Kafka client defaults, and '
        'why": from 10 to 500 ms the latency differences were within what loaded runs could '
        "resolve). It also cuts the requests a "
        "managed cluster counts against its quota.",
    ]


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
        "(3 descriptors a broker). Its start grows faster than linearly with N (the table), "
        "and a leader move can wait most of a second, so above 64 brokers `nines broker` lets "
        "the mock place one replica per partition itself (partition p on broker p mod N + 1) "
        "and caps N at 4,096.",
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
    """Issue 39's two targets, judged on the 1,000-broker rows and the model."""
    whole = next((r for r in runs.get("scale", []) if r.get("brokers") == FLEET_BROKERS
                  and "core" in r), None)  # fmt: skip
    if whole is None:
        return [f"Targets not judged: no 1,000-broker run in {RESULTS.name}."]
    kept = [r for g in ("scale", "replica", "levers") for r in runs.get(g, []) if kept_schedule(r)]
    ones = [r for r in kept if r.get("partitions_per_broker") == 1]
    more = [r for r in kept if r.get("partitions_per_broker", 1) > 1]

    def worst_of(rows: list[dict[str, Any]]) -> tuple[str, int, float] | None:
        if not rows:
            return None
        w = max(rows, key=lambda r: r["produce_requests_per_broker_tick"])
        return w["lever"], w["brokers"], w["produce_requests_per_broker_tick"]

    worst, worst_more = worst_of(ones), worst_of(more)
    out = []
    if kept_schedule(whole):
        out.append(
            f"One probe kept the schedule of {FLEET_BROKERS:,} brokers at 10/s each: "
            f"**{whole['core']:.2f}** cores (load {whole['load_1m'][0]:.0f}→"
            f"{whole['load_1m'][1]:.0f})."
        )
    else:
        sent = whole["produce_requests_per_broker_s"]["mean"]
        lag = _ms(whole.get("send_lag_us"), "p99")
        out.append(
            f"**One probe did not keep up with {FLEET_BROKERS:,} brokers at 10/s each**: of "
            f"{whole.get('echoes', 0):,} messages intended in its window {whole.get('lost', 0):,} "
            f"were lost (not read back within the 30 s loss timeout), e2e p50 "
            f"{_ms(whole.get('e2e_us'), 'p50')} ms, send lag p99 {lag} ms; the producer packed "
            f"the backlog into {sent:.1f} produce requests a second per broker. It used "
            f"{whole['core']:.2f} cores of a machine at load {whole['load_1m'][0]:.0f}→"
            f"{whole['load_1m'][1]:.0f}, and took {whole['cold']['start_s']:g} s and "
            f"{whole['cold']['cpu_s']:g} CPU-seconds to start probing. Its row's requests per "
            "tick are therefore no judgement."
        )
    if worst:
        out.append(
            f"\nProduce requests per broker per tick ≤ {REQUESTS_PER_TICK:g} (issue 39), judged on "
            f"every row with one partition per broker (the default layout) that kept its "
            f"schedule: worst **{worst[2]:.2f}** ({worst[0]}, {worst[1]:,} brokers): "
            f"**{'met' if worst[2] <= REQUESTS_PER_TICK else 'not met'}**."
        )
    if worst_more:
        out.append(
            f"With more partitions per broker it is not met whatever the schedule or the linger: "
            f"worst **{worst_more[2]:.2f}** ({worst_more[0]}, {worst_more[1]:,} brokers); "
            "librdkafka sends one partition per ProduceRequest (its issue #1700), so the only "
            "lever that works with it is fewer partitions per broker (the levers below)."
            if worst_more[2] > REQUESTS_PER_TICK
            else f"With more partitions per broker: worst {worst_more[2]:.2f}, also met."
        )
    if model:
        need = replicas_needed(model)
        fleet = need * replica_core(model, need) if need else float("nan")
        out.append(
            f"\nThe fleet model, solved over the {model['rows']} baseline rows that kept their "
            f"schedule: a replica costs **{model['base']:.3f}** of a core, plus "
            f"**{model['per_known'] * 1000:.2f}** millicores for every broker its clients know "
            f"(librdkafka keeps a thread and a wake-up pipe per broker in each client, whether "
            f"it probes that broker or not), plus **{model['per_probed'] * 1000:.2f}** for every "
            f"broker it probes at 10/s. With replicas of at most {REPLICA_CORE_BUDGET:g} core, "
            f"{FLEET_BROKERS:,} brokers need **{need} replicas, {fleet:.2f} cores** in all: the "
            f"target of {FLEET_CORES:g} cores for the fleet is "
            f"{'met' if fleet < FLEET_CORES else f'missed by {fleet / FLEET_CORES - 1:.0%}'}. "
            "Every replica pays for knowing all the brokers, so more replicas cost more in all; "
            "the model is fitted on a loaded machine, whose CPU-seconds per message are not a "
            "quiet machine's."
        )
    hundred = next((r for r in runs.get("scale", []) if r.get("brokers") == 100
                    and kept_schedule(r)), None)  # fmt: skip
    if hundred:
        t = hundred["core_by_thread"]
        out.append(
            f"\nWhere a probed broker's cost goes (100 brokers, one probe): librdkafka's broker "
            f"threads took {t['rdk_broker']:.2f} of its {hundred['core']:.2f} cores, Python "
            f"{t['python']:.2f}; its consumer sent "
            f"{hundred['consumer_requests_per_broker_s']['mean']:.0f} requests a second to each "
            f"broker against {hundred['produce_requests_per_broker_s']['mean']:.0f} produce "
            "requests: with `fetch.wait.max.ms` 10 (the probe's default) an idle fetch comes "
            "back every 10 ms, so the probe's own reading, not its sending, is what grows with "
            "brokers (the `fetch.wait.max.ms` row of the levers)."
        )
    return out
