"""How long a probe fleet's partitions go unowned when a member joins, leaves or is killed,
under Kafka's classic group protocol (cooperative-sticky) and the consumer protocol (KIP-848).

``python -m bench.fleet_rebalance`` starts a 3-broker Apache Kafka (``nines broker --engine
kafka``), runs group members as processes of their own (each prints its assignment whenever it
changes) and times, per protocol: a 4th member joining (until every member holds its share), a
member leaving cleanly (SIGTERM: it closes and leaves the group) and a member killed (SIGKILL:
until its partitions are held again). The figures chose the fleet's protocol (docs/deploy.md,
"A probe fleet").
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from testbroker import EmbeddedBroker

PARTITIONS = 6
MEMBER = r"""
import json, signal, sys, time
from confluent_kafka import Consumer
stop = []
signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
bootstrap, topic, group, protocol, name = sys.argv[1:6]
conf = {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
        "auto.offset.reset": "latest", "group.protocol": protocol}
if protocol == "classic":
    conf |= {"partition.assignment.strategy": "cooperative-sticky", "session.timeout.ms": 10000,
             "heartbeat.interval.ms": 1000}
c = Consumer(conf)
print(json.dumps({"name": name, "t": time.time(), "held": None}), flush=True)
c.subscribe([topic])
held = None
while not stop:
    c.poll(0.02)
    now = sorted(tp.partition for tp in c.assignment())
    if now != held:
        held = now
        print(json.dumps({"name": name, "t": time.time(), "held": held}), flush=True)
c.close()  # leaves the group: its partitions move at once
"""


class Fleet:
    """Member processes and what each holds now."""

    def __init__(self, bootstrap: str, topic: str, protocol: str) -> None:
        self.bootstrap, self.topic, self.protocol = bootstrap, topic, protocol
        self.procs: dict[str, subprocess.Popen[str]] = {}
        self.held: dict[str, list[int]] = {}
        self.started: dict[str, float] = {}
        self.lock = threading.Lock()

    def add(self, name: str) -> None:
        group = f"fleet-bench-{self.protocol}"
        argv = [sys.executable, "-c", MEMBER, self.bootstrap, self.topic, group, self.protocol]
        proc = subprocess.Popen([*argv, name], stdout=subprocess.PIPE, text=True)
        self.procs[name] = proc
        threading.Thread(target=self._read, args=(proc,), daemon=True).start()

    def _read(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            rec = json.loads(line)
            with self.lock:
                if rec["held"] is None:
                    self.started[rec["name"]] = rec["t"]
                else:
                    self.held[rec["name"]] = rec["held"]

    def stop(self, name: str, sig: int) -> float:
        proc = self.procs.pop(name)
        t = time.time()
        proc.send_signal(sig)
        if sig == signal.SIGKILL:  # its last assignment is void: nobody reads it any more
            with self.lock:
                self.held.pop(name, None)
        else:
            proc.wait(30)
            with self.lock:
                self.held.pop(name, None)
        return t

    def balanced(self) -> bool:
        """Every partition held by exactly one live member, and every member holds one."""
        with self.lock:
            live = [self.held.get(n) for n in self.procs]
            if any(h is None or not h for h in live):
                return False
            flat = [p for h in live for p in h]  # type: ignore[union-attr]
        return sorted(flat) == list(range(PARTITIONS))

    def wait_balanced(self, since: float, timeout_s: float = 120.0) -> float:
        deadline = time.time() + timeout_s
        while time.time() < deadline:
            if self.balanced():
                return time.time() - since
            time.sleep(0.01)
        return float("nan")

    def close(self) -> None:
        for proc in self.procs.values():
            proc.kill()
            proc.wait()


def run(bootstrap: str, protocol: str) -> dict[str, float]:
    """Seconds to a balanced group after a start of 3, a join, a clean leave and a kill."""
    fleet = Fleet(bootstrap, f"fleet-bench-{protocol}", protocol)
    out: dict[str, float] = {}
    try:
        t0 = time.time()
        for n in ("a", "b", "c"):
            fleet.add(n)
        out["start_3"] = fleet.wait_balanced(t0)
        time.sleep(2)
        fleet.add("d")
        while "d" not in fleet.started:
            time.sleep(0.01)
        out["join_4th"] = fleet.wait_balanced(fleet.started["d"])
        time.sleep(2)
        out["leave_sigterm"] = fleet.wait_balanced(fleet.stop("d", signal.SIGTERM))
        time.sleep(2)
        out["kill_sigkill"] = fleet.wait_balanced(fleet.stop("c", signal.SIGKILL))
    finally:
        fleet.close()
    return out


RESULTS = Path(__file__).resolve().parent / "results" / "fleet_rebalance.json"


def main() -> None:
    """Both protocols on one cluster; the figures to stdout and ``bench/results``."""
    topics = [(f"fleet-bench-{p}", PARTITIONS, 1) for p in ("classic", "consumer")]
    with EmbeddedBroker(engine="kafka", brokers=3, topics=topics) as kafka:
        results = {p: run(kafka.bootstrap, p) for p in ("classic", "consumer")}
    text = json.dumps({"os_load1": os.getloadavg()[0], "results": results}, indent=1)
    RESULTS.write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
