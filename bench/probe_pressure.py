"""The probe's CPU when a broker is slow, stalled, down or restarting, and its produce requests
per broker for each schedule (issue 31): ``python -m bench.probe_pressure``.

Each case runs a real probe process (``nines probe``'s agent, in a child process of this
module so librdkafka's statistics of the probe producer can be read) against ``nines broker``
(the mock, or Apache Kafka). CPU is read from /proc over two windows of the same length in
the same run: a healthy one, then one from the fault's start to ``AFTER_S`` after recovery.
The ratio of the two is the figure issue 31 bounds (≤ 1.5). Requests per broker come from
librdkafka's statistics (``brokers[].req.Produce``) over the healthy window.

Results go to bench/results/probe_pressure.json; ``bench.report`` puts them in
docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from bench.procstat import cpu_s

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "probe_pressure.json"
#: Seconds a fault lasts, and the window runs on after recovery (issue 31's window).
FAULT_S = 5.0
AFTER_S = 10.0
#: Seconds the probe runs before the first window (its clients connect, the JIT of nothing).
SETTLE_S = 5.0
#: librdkafka statistics interval of the probe producer in the child (ms).
STATS_MS = 1000


# -- the child: one probe, its producer's statistics written to a file ---------------------------


def child(config: dict[str, Any], stats_path: str) -> None:
    """Run a probe until SIGTERM; the probe producer's latest statistics go to ``stats_path``."""
    import confluent_kafka

    from probes import ProbeAgent, ProbeConfig
    from probes.agent import quiet_process_for_probing

    real = confluent_kafka.Producer

    def write(stats: str) -> None:
        tmp = stats_path + ".tmp"
        Path(tmp).write_text(stats)
        os.replace(tmp, stats_path)

    def producer(conf: dict[str, Any], *a: Any, **kw: Any) -> Any:
        if conf.get("enable.idempotence") is False:  # the probe producer (echoes': idempotent)
            conf = {**conf, "statistics.interval.ms": STATS_MS, "stats_cb": write}
        return real(conf, *a, **kw)

    confluent_kafka.Producer = producer  # type: ignore[misc,assignment]
    quiet_process_for_probing()
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    agent = ProbeAgent(ProbeConfig(**config)).start()
    while not stop:
        time.sleep(0.1)
    agent.stop(5)
    print(json.dumps(agent.totals()), flush=True)


def produce_requests(stats_path: Path) -> dict[str, int]:
    """Produce requests sent so far by the probe producer, per broker id (from its statistics)."""
    try:
        stats = json.loads(stats_path.read_text())
    except (OSError, ValueError):
        return {}
    out = {}
    for b in stats.get("brokers", {}).values():
        if b.get("nodeid", -1) >= 0:
            out[str(b["nodeid"])] = int(b.get("req", {}).get("Produce", 0))
    return out


# -- the parent ---------------------------------------------------------------------------------


class ProbeRun:
    """A child probe process and its statistics file."""

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        rate: float,
        schedule: str,
        fmt: str,
        kafka: dict[str, str] | None = None,
    ) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="nines-pressure-"))
        self.stats = self.dir / "stats.json"
        config = {
            "bootstrap": bootstrap,
            "topic": topic,
            "rate": rate,
            "size": 1024,
            "metrics_port": 0,
            "probe_id": f"pressure-{os.getpid()}",
            "schedule": schedule,
            "echo_format": fmt,
            "loss_timeout": 30,
            "kafka": kafka or {},
        }
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        code = (
            "import json,sys; from bench.probe_pressure import child; "
            "child(json.loads(sys.argv[1]), sys.argv[2])"
        )
        self.proc = subprocess.Popen(
            [sys.executable, "-c", code, json.dumps(config), str(self.stats)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def cpu_s(self) -> float:
        return cpu_s(self.proc.pid)

    def stop(self) -> dict[str, int]:
        self.proc.send_signal(signal.SIGTERM)
        out, err = self.proc.communicate(timeout=60)
        if self.proc.returncode:
            raise RuntimeError(f"probe exited {self.proc.returncode}: {err[-800:]}")
        return json.loads(out.strip().splitlines()[-1])


class CpuReadable(Protocol):
    """A running process whose CPU seconds so far can be read."""

    def cpu_s(self) -> float: ...


def window(run: CpuReadable, seconds: float, during: Callable[[], None] | None = None) -> float:
    """CPU (fraction of a core) of ``run`` over ``seconds``; ``during`` runs at its start."""
    c0, t0 = run.cpu_s(), time.monotonic()
    if during is not None:
        during()
    time.sleep(max(0.0, seconds - (time.monotonic() - t0)))
    return (run.cpu_s() - c0) / (time.monotonic() - t0)


def stopped_for(pid: int, seconds: float) -> None:
    """SIGSTOP ``pid`` for ``seconds``, then SIGCONT (whatever happens meanwhile)."""
    os.kill(pid, signal.SIGSTOP)
    try:
        time.sleep(seconds)
    finally:
        os.kill(pid, signal.SIGCONT)


def faults(broker: Any, engine: str) -> dict[str, Callable[[], None]]:
    """Each slow-broker state: a callable that injects it, waits FAULT_S, and recovers."""

    def rtt(ms: int) -> Callable[[], None]:
        def go() -> None:
            for b in range(1, broker.brokers + 1):
                broker.rtt(b, ms)
            time.sleep(FAULT_S)
            for b in range(1, broker.brokers + 1):
                broker.rtt(b, 0)

        return go

    def stalled() -> None:
        stopped_for(broker.broker_pid(1), FAULT_S)

    def down() -> None:
        broker.down(1)
        time.sleep(FAULT_S)
        broker.ctl("up", "1")

    out: dict[str, Callable[[], None]] = {"stalled": stalled, "down": down}
    if engine == "mock":
        out = {"slow 200 ms": rtt(200), "slow 2 s": rtt(2000), **out}
    return out


def pressure_case(
    engine: str,
    per_broker: int,
    fmt: str,
    schedule: str,
    total_rate: float,
    states: bool,
    kafka: dict[str, str] | None = None,
) -> dict[str, Any]:
    """One broker cluster, one probe: the healthy figure, then each fault's ratio to it."""
    from testbroker import EmbeddedBroker

    brokers = 1 if engine == "kafka" else 3
    parts = brokers * per_broker
    topics: list[Any] = [("nines.probe", parts, 1), ("nines.echoes", 1, 1)]
    if engine == "mock":  # the mock takes no replication factor
        topics = [("nines.probe", parts), ("nines.echoes", 1)]
    broker = EmbeddedBroker(engine=engine, brokers=brokers, topics=topics).start()  # type: ignore[arg-type]
    try:
        run = ProbeRun(broker.bootstrap, "nines.probe", total_rate / parts, schedule, fmt, kafka)
        time.sleep(SETTLE_S)
        before = produce_requests(run.stats)
        t0 = time.monotonic()
        healthy = window(run, FAULT_S + AFTER_S)
        after = produce_requests(run.stats)
        dt = time.monotonic() - t0
        reqs = {b: round((after.get(b, 0) - before.get(b, 0)) / dt, 1) for b in after}
        result: dict[str, Any] = {
            "engine": engine,
            "brokers": brokers,
            "partitions_per_broker": per_broker,
            "echo_format": fmt,
            "schedule": schedule,
            "rate_total": total_rate,
            "kafka": kafka or {},
            "healthy_core": round(healthy, 4),
            "core_per_1000": round(healthy * 1000 / total_rate, 4),
            "produce_requests_per_s": reqs,
            "load": os.getloadavg()[0],
        }
        if states:
            for name, go in faults(broker, engine).items():
                ref = window(run, FAULT_S + AFTER_S)
                faulted = window(run, FAULT_S + AFTER_S, during=go)
                result[name] = {"healthy_core": round(ref, 4), "core": round(faulted, 4),
                                "ratio": round(faulted / ref, 2)}  # fmt: skip
        result["totals"] = run.stop()
        return result
    finally:
        broker.stop()


def rss_mib(pid: int) -> int:
    """Resident memory of ``pid`` now, MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) // 1024
    raise RuntimeError(f"no VmRSS for {pid}")


def memory_stall(stall_s: float = 60.0, total_rate: float = 20_000.0) -> dict[str, Any]:
    """Peak resident memory of ``nines probe`` at ``total_rate`` through a ``stall_s`` stall of
    the whole cluster (the mock, SIGSTOP) and 40 s after: what the chart's memory limit must
    hold (issue 31: 60 s at 20,000 msgs/s, the probe's hard limit)."""
    from monitor.processes import probe_argv
    from testbroker import EmbeddedBroker

    with EmbeddedBroker() as broker, tempfile.TemporaryDirectory() as tmp:
        summary = Path(tmp) / "summary.json"
        argv = probe_argv(broker.bootstrap, "memory", "--rate", f"{total_rate / 3:g}",
                          "--summary-file", str(summary))  # fmt: skip
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(10)
        before = rss_mib(proc.pid)
        broker.pause()
        t0, peak = time.monotonic(), before
        while time.monotonic() - t0 < stall_s:
            time.sleep(1)
            peak = max(peak, rss_mib(proc.pid))
        broker.resume()
        t1 = time.monotonic()
        while time.monotonic() - t1 < 40:
            time.sleep(1)
            peak = max(peak, rss_mib(proc.pid))
        proc.send_signal(signal.SIGTERM)
        proc.wait(120)
        totals = json.loads(summary.read_text())
    return {"rate_total": total_rate, "stall_s": stall_s, "size": 512, "rss_before_mib": before,
            "rss_peak_mib": peak, "totals": totals, "load": os.getloadavg()[0]}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--engines", default="mock,kafka")
    ap.add_argument("--per-broker", default="1,3,10")
    ap.add_argument("--formats", default="v2,v1")
    ap.add_argument("--schedules", default="staggered,aligned")
    ap.add_argument("--rate", type=float, default=1000.0, help="msgs/s, all partitions")
    ap.add_argument("--no-states", action="store_true", help="healthy figures only")
    ap.add_argument("--linger-ms", help="the probe producer's linger.ms (default the probe's)")
    ap.add_argument("--out", default=str(RESULTS))
    ap.add_argument("--memory", action="store_true", help="only the 60 s stall's memory")
    args = ap.parse_args(argv)
    if args.memory:
        result = memory_stall()
        print(json.dumps(result), flush=True)
        (RESULTS.parent / "probe_memory.json").write_text(json.dumps(result, indent=1) + "\n")
        return 0
    results = []
    for engine in args.engines.split(","):
        for fmt in args.formats.split(","):
            for per_broker in map(int, args.per_broker.split(",")):
                for schedule in args.schedules.split(","):
                    # the fault states once per engine and format, at 3 partitions a broker
                    states = not args.no_states and per_broker == 3 and schedule == "staggered"
                    kafka = {"linger.ms": args.linger_ms} if args.linger_ms else None
                    r = pressure_case(engine, per_broker, fmt, schedule, args.rate, states, kafka)
                    print(json.dumps(r), flush=True)
                    results.append(r)
    from bench.machine import machine_facts

    payload = {"cases": results, "machine": machine_facts()}
    Path(args.out).write_text(json.dumps(payload, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
