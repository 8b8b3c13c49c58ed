"""What one probe costs per broker it probes, and its produce requests per broker per tick, at
10, 100 and 1,000 brokers (issue 39, part 3): ``python -m bench.fleet_cost``.

Each case is a fresh ``nines broker`` (librdkafka's mock, all brokers in one process; above 64
brokers each topic has one replica, partition p on broker p mod N + 1) and one ``python -m
monitor probe`` process against it, its echo records sent to a second, one-broker mock
(``--echo-bootstrap``) so that they can be read back without a client that knows every broker.

Measured over a warm window (after the probe has probed ``WARM_S``), one case at a time:

- CPU of the probe process from /proc (utime + stime, all threads), as CPU-seconds per second,
  and by thread (librdkafka's broker threads, its main threads, Python's);
- requests per broker of the probe's producer and consumer, from librdkafka's statistics as
  the probe exports them (``nines_probe_client_requests_total``, its ``tx``: the producer's are
  its Produce requests and the rare Metadata one), scraped before and after the window;
- the end-to-end latency (``received_us - intended_us``, a lost message at its loss timeout)
  of every echo intended in the window, read back from the echo mock;
- the process's threads, descriptors and memory, and the load average (1 min) at both ends.

The cold figure is the CPU the probe spent from its start to its " probing " line. Results go
to bench/results/fleet_cost.json; ``bench.report`` puts them in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import sys
import tempfile
import time
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bench.floor import EchoReader
from bench.machine import write_result
from bench.procstat import cpu_s, cpu_s_by_thread, rss_mib, start_logged
from bench.samples import quantiles
from core.echo import BadEcho, Echo
from core.echo_v2 import decode_message
from monitor.processes import probe_argv
from probes.summary import read_summary

ROOT = Path(__file__).resolve().parents[1]
PROBE_TOPIC = "nines.probe"
#: Seconds the probe probes before the window, and the window (1,000 brokers: shorter, see
#: ``Case.measure_s``); librdkafka's statistics are 1 s old at worst, so a 30 s window's
#: request rates are within ~3 %.
WARM_S, MEASURE_S = 15.0, 30.0
#: msgs/s per broker: issue 39's target load (10,000 msgs/s at 1,000 brokers).
RATE_PER_BROKER = 10.0
#: Two cores for the whole fleet at 1,000 brokers (issue 39).
FLEET_CORES_TARGET = 2.0
FLEET_BROKERS = 1000


@dataclass(frozen=True)
class Case:
    """One probe against one mock cluster."""

    brokers: int
    #: partitions of the probe topic: brokers × per broker, or fewer (a replica's share: the
    #: probe knows every broker from metadata and probes the first ``partitions`` of them)
    partitions: int
    schedule: str = "staggered"
    #: the probe's ``kafka`` settings (``linger.ms``, ``fetch.wait.max.ms``)
    kafka: dict[str, str] = field(default_factory=dict)
    #: msgs/s per probed broker (all its partitions together)
    rate_per_broker: float = RATE_PER_BROKER
    lever: str = "baseline"

    @property
    def probed_brokers(self) -> int:
        return min(self.brokers, self.partitions)

    @property
    def per_broker(self) -> float:
        return self.partitions / self.probed_brokers

    @property
    def rate_per_partition(self) -> float:
        return self.rate_per_broker / self.per_broker

    @property
    def measure_s(self) -> float:
        # 4,000+ threads at 1,000 brokers load a shared machine: measure for less time there
        return 20.0 if self.brokers >= 1000 else MEASURE_S


def free_port() -> int:
    """A loopback port nobody listens on now (for the probe's /metrics)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def client_requests(port: int) -> dict[str, dict[str, float]]:
    """``nines_probe_client_requests_total`` by client and broker id, scraped now."""
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as r:
        text = r.read().decode()
    out: dict[str, dict[str, float]] = {}
    for fam in text_string_to_metric_families(text):
        if fam.name != "nines_probe_client_requests":
            continue
        for s in fam.samples:
            if s.name.endswith("_total"):
                client = out.setdefault(s.labels["client"], {})
                client[s.labels["broker"]] = client.get(s.labels["broker"], 0.0) + s.value
    return out


def per_broker_rates(
    before: dict[str, float], after: dict[str, float], brokers: int, seconds: float
) -> dict[str, float]:
    """Mean and max requests/s over brokers 1..``brokers`` (the probed ones)."""
    rates = [
        (after.get(str(b), 0.0) - before.get(str(b), 0.0)) / seconds for b in range(1, brokers + 1)
    ]
    return {"mean": round(sum(rates) / len(rates), 2), "max": round(max(rates), 2),
            "min": round(min(rates), 2)}  # fmt: skip


def thread_groups(by_thread: dict[str, float]) -> dict[str, float]:
    """CPU seconds by kind of thread: librdkafka's per-broker threads, its other threads, and
    the Python interpreter's (the probe's own loops)."""
    out = {"rdk_broker": 0.0, "rdk_other": 0.0, "python": 0.0}
    for name, s in by_thread.items():
        key = "rdk_broker" if name.startswith("rdk:broker") else (
            "rdk_other" if name.startswith("rdk:") else "python")  # fmt: skip
        out[key] += s
    return out


def process_facts(pid: int) -> dict[str, Any]:
    """Threads, open descriptors and resident memory of ``pid`` now."""
    return {
        "threads": len(os.listdir(f"/proc/{pid}/task")),
        "fds": len(os.listdir(f"/proc/{pid}/fd")),
        "rss_mib": round(rss_mib(pid)),
    }


def latencies(values: list[bytes | None], probe_id: str, w0_us: int, w1_us: int) -> dict[str, Any]:
    """End-to-end quantiles of every echo of ``probe_id`` intended in [w0_us, w1_us)."""
    e2e: list[int] = []
    send_lag: list[int] = []
    publish: list[int] = []
    lost = bad = 0
    for value in values:
        try:
            records = decode_message(value or b"")
        except BadEcho:
            bad += 1
            continue
        for rec in records:
            if isinstance(rec, Echo) and rec.probe == probe_id and w0_us <= rec.intended_us < w1_us:
                lost += rec.lost
                latency = rec.latency_us("e2e")  # a lost message's is its loss timeout
                if latency is not None:
                    e2e.append(latency)
                send_lag.append(rec.sent_us - rec.intended_us)
                if rec.acked_us:  # linger.ms shows here: sent to acked
                    publish.append(rec.acked_us - rec.sent_us)
    return {"echoes": len(e2e), "lost": lost, "bad_records": bad, "e2e_us": quantiles(e2e),
            "send_lag_us": quantiles(send_lag), "publish_us": quantiles(publish)}  # fmt: skip


def run_case(case: Case, workdir: Path) -> dict[str, Any]:
    """One fresh probe cluster and echo cluster, one probe; the warm window's figures."""
    from testbroker import EmbeddedBroker

    probe_id = f"fleet-{case.brokers}-{case.partitions}-{os.getpid()}"
    config = workdir / f"{probe_id}.yaml"
    # past the loss timeout (30 s): every message ends received or lost before the stop
    probe_conf = {"kafka": case.kafka, "shutdown_timeout": "40s"}
    config.write_text(json.dumps({"probe": probe_conf}))  # JSON is YAML
    summary = workdir / f"{probe_id}.summary.json"
    port = free_port()
    topics = [(PROBE_TOPIC, case.partitions)]
    result: dict[str, Any] = {**asdict(case), "rate_per_partition": case.rate_per_partition,
                              "probed_brokers": case.probed_brokers,
                              "partitions_per_broker": case.per_broker}  # fmt: skip
    t_start = time.monotonic()
    with (
        EmbeddedBroker(brokers=case.brokers, topics=topics, ready_timeout_s=300) as probed,
        EmbeddedBroker(brokers=1) as echoes,
    ):
        result["broker_start_s"] = round(time.monotonic() - t_start, 1)
        reader = EchoReader(echoes.bootstrap)
        reader.start()
        cmd = probe_argv(
            probed.bootstrap, probe_id, "--rate", f"{case.rate_per_partition:g}",
            "--echo-bootstrap", echoes.bootstrap, "--schedule", case.schedule,
            "--metrics-port", str(port), "--config", str(config), "--summary-file", str(summary),
        )  # fmt: skip
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
        t0 = time.monotonic()
        proc, log, started, stderr_reader = start_logged(cmd, ROOT, env, " probing ")
        try:
            while not started.wait(0.5):
                if proc.poll() is not None or time.monotonic() - t0 > 240:
                    raise RuntimeError(f"probe did not start: {' | '.join(log[-5:])}")
            cold = thread_groups(cpu_s_by_thread(proc.pid))
            result["cold"] = {
                "start_s": round(time.monotonic() - t0, 1),
                "cpu_s": round(cpu_s(proc.pid), 2),
                "cpu_s_by_thread": {k: round(v, 2) for k, v in cold.items()},
            }
            time.sleep(WARM_S)
            req0 = client_requests(port)
            threads0 = thread_groups(cpu_s_by_thread(proc.pid))
            load0 = os.getloadavg()[0]
            c0, m0, b0 = cpu_s(proc.pid), time.monotonic(), cpu_s(probed.pid)
            w0_us = time.time_ns() // 1000
            time.sleep(case.measure_s)
            c1, m1, b1 = cpu_s(proc.pid), time.monotonic(), cpu_s(probed.pid)
            w1_us = time.time_ns() // 1000
            threads1 = thread_groups(cpu_s_by_thread(proc.pid))
            load1 = os.getloadavg()[0]
            facts = process_facts(proc.pid)
            req1 = client_requests(port)
            dt = m1 - m0
            proc.send_signal(signal.SIGTERM)
            code = proc.wait(120)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            stderr_reader.join(5)
        values = reader.finish(120)
    core = (c1 - c0) / dt
    n = case.probed_brokers
    produce = per_broker_rates(req0.get("producer", {}), req1.get("producer", {}), n, dt)
    fetch = per_broker_rates(req0.get("consumer", {}), req1.get("consumer", {}), n, dt)
    result.update(
        {
            "measured_s": round(dt, 1),
            "msgs_per_s": round(case.rate_per_broker * n, 1),
            "core": round(core, 4),
            "core_per_broker": round(core / n, 6),
            "mock_core": round((b1 - b0) / dt, 4),
            "core_per_1000_msgs": round(core * 1000 / (case.rate_per_broker * n), 4),
            "core_by_thread": {k: round((threads1[k] - threads0[k]) / dt, 4) for k in threads0},
            "produce_requests_per_broker_s": produce,
            "produce_requests_per_broker_tick": round(produce["mean"] / case.rate_per_partition, 2),
            "consumer_requests_per_broker_s": fetch,
            **facts,
            **latencies(values, probe_id, w0_us, w1_us),
            "totals": read_summary(summary),
            "probe_exit_code": code,
            "probe_log_tail": log[-2:],
            "load_1m": [round(load0, 2), round(load1, 2)],
            "warm": True,
        }
    )
    return result


MOCK_CHILD = """
import json, os, resource, sys, time
from bench.procstat import cpu_s
from testbroker.mock import MockCluster
n, leaders = int(sys.argv[1]), int(sys.argv[2])
t0, c0 = time.monotonic(), cpu_s(os.getpid())
mc = MockCluster(n)
mc.create_topic("nines.probe", n, 1)
start_s, start_cpu = time.monotonic() - t0, cpu_s(os.getpid()) - c0
t1 = time.monotonic()
for p in range(leaders):
    mc.set_leader("nines.probe", p, (p + 1) % n + 1)
leader_s = (time.monotonic() - t1) / max(leaders, 1)
me = f"/proc/{os.getpid()}"
c1 = cpu_s(os.getpid())
time.sleep(5)
print(json.dumps({"brokers": n, "start_s": round(start_s, 2), "start_cpu_s": round(start_cpu, 2),
    "set_leader_s": round(leader_s, 3), "threads": len(os.listdir(me + "/task")),
    "fds": len(os.listdir(me + "/fd")), "idle_core": round((cpu_s(os.getpid()) - c1) / 5, 4),
    "nofile_limit": resource.getrlimit(resource.RLIMIT_NOFILE)[0],
    "load_1m": round(os.getloadavg()[0], 2)}))
mc.destroy()
"""


def mock_limit(sizes: tuple[int, ...] = (3, 100, 1000, 4096, 8192)) -> list[dict[str, Any]]:
    """The mock alone in a fresh process per size: start time and CPU, one leader move's wait,
    threads, descriptors and idle CPU (what bounds the brokers one process holds)."""
    import subprocess

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = []
    for n in sizes:
        proc = subprocess.run([sys.executable, "-c", MOCK_CHILD, str(n), "3"], env=env,
                              capture_output=True, text=True, timeout=600, check=False)  # fmt: skip
        lines = proc.stdout.strip().splitlines()
        out.append(json.loads(lines[-1]) if lines else {"brokers": n, "error": proc.stderr[-300:]})
        print(json.dumps(out[-1]), flush=True)
    return out


#: name -> cases; ``scale`` is the issue's table, the others its levers (docs/benchmarks.md).
def plan(quick: bool) -> dict[str, list[Case]]:
    """The cases of a full run (``quick``: 10 and 100 brokers, no levers)."""
    scale = [Case(10, 10), Case(100, 100)] + ([] if quick else [Case(1000, 1000)])
    if quick:
        return {"scale": scale}
    return {
        "scale": scale,
        # a replica's share: every broker known from metadata, a tenth of them probed
        "replica": [Case(1000, 100, lever="1,000 brokers known, 100 probed")],
        "levers": [
            # the control every lever at 100 brokers is read against, from the same batch
            Case(100, 100, lever="control: 1 per broker, staggered"),
            # one probe does not keep 1,000 brokers' schedule (docs/benchmarks.md): at 100
            Case(100, 100, "aligned", lever="aligned ticks"),
            Case(100, 300, lever="3 partitions per broker"),
            Case(100, 300, "aligned", lever="3 partitions per broker, aligned ticks"),
            # the tick's spread: a broker's 3 partitions send 100 ms apart, 200 ms first to last
            Case(100, 300, kafka={"linger.ms": "200"}, lever="3 per broker, linger.ms 200"),
            Case(100, 100, kafka={"linger.ms": "100"}, lever="linger.ms 100"),
            Case(100, 100, kafka={"fetch.wait.max.ms": "500"}, lever="fetch.wait.max.ms 500"),
        ],
    }


def case_key(r: dict[str, Any]) -> tuple[Any, ...]:
    """What makes a row the same case as another (its settings, not its figures)."""
    kafka = tuple(sorted((r.get("kafka") or {}).items()))
    return (r.get("lever"), r.get("brokers"), r.get("partitions"), r.get("schedule"), kafka)


def merged(
    old: dict[str, list[dict[str, Any]]], new: dict[str, list[dict[str, Any]]]
) -> dict[str, list[dict[str, Any]]]:
    """``old``'s rows with each case run again replaced by its ``new`` row (new ones added)."""
    out = {g: list(rows) for g, rows in old.items()}
    for group, rows in new.items():
        kept = out.setdefault(group, [])
        for r in rows:
            at = [i for i, k in enumerate(kept) if case_key(k) == case_key(r)]
            if at:
                kept[at[0]] = r
            else:
                kept.append(r)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="10 and 100 brokers only")
    ap.add_argument("--only", help="comma list of groups: mock, scale, replica, levers")
    ap.add_argument("--brokers", help="comma list: only the cases of these cluster sizes")
    ap.add_argument("--out", default="fleet_cost", help="result name under bench/results/")
    args = ap.parse_args(argv)
    groups = plan(args.quick)
    if args.only:
        groups = {k: v for k, v in groups.items() if k in args.only.split(",")}
    if args.brokers:
        sizes = {int(b) for b in args.brokers.split(",")}
        groups = {k: [c for c in v if c.brokers in sizes] for k, v in groups.items()}
    runs: dict[str, list[dict[str, Any]]] = {}
    started = time.perf_counter()
    skip_mock = args.quick or args.brokers or (args.only and "mock" not in args.only)
    mock = [] if skip_mock else mock_limit()
    with tempfile.TemporaryDirectory(prefix="nines-fleet-") as tmp:
        for group, cases in groups.items():
            for case in cases:
                print(f"fleet_cost: {group} {case}", flush=True)
                try:
                    r = run_case(case, Path(tmp))
                except Exception as exc:  # keep the other cases; the report shows the reason
                    r = {**asdict(case), "error": f"{type(exc).__name__}: {exc}"[:400]}
                print(json.dumps(r), flush=True)
                runs.setdefault(group, []).append(r)
    if args.only or args.brokers:  # the cases not rerun keep their figures (each its own load)
        from bench.machine import RESULTS_DIR

        try:
            before = json.loads((RESULTS_DIR / f"{args.out}.json").read_text())
        except (OSError, ValueError):
            before = {}
        runs = merged(before.get("runs", {}), runs)
        mock = mock or before.get("mock", [])
    payload = {
        "runs": runs,
        "mock": mock,
        "quick": args.quick,
        "wall_s": round(time.perf_counter() - started, 1),
        "method": __doc__,
    }
    write_result(args.out, payload)
    failed = [r["error"] for rs in runs.values() for r in rs if "error" in r]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
