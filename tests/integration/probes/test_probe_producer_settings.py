"""The probe producer's settings, by what they do on a slow broker (docs/brokers.md, "A slow
broker and the probe's CPU"): not idempotent, so its broker thread does not spin while 5
requests wait; at most 5 requests in flight, so messages that wait for a slot gather into the
next request instead of one request each.

Two real ``nines probe`` processes side by side on a fresh mock whose broker 1 (partition 0's
leader) answers after 200 ms: the defaults, and the control, the same probe made idempotent (the
old default) through the ``kafka:`` settings. Counts from each probe's /metrics (librdkafka's
statistics), so the comparison does not rest on CPU time on a shared machine."""

from __future__ import annotations

import re
import time
import urllib.request
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from probe_runs import ProbeProcess

from testbroker import EmbeddedBroker

RATE = 300  # per partition, as the measurement in docs/brokers.md
WINDOW_S = 3.0


def counters(port: int) -> dict[str, float]:
    """name{labels} → value of the probe's producer counters for brokers 1 and 2, and sent."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    out = {}
    for line in text.splitlines():
        m = re.match(
            r'nines_probe_client_(requests|wakeups)_total\{broker="(\d)",client="producer"', line
        )
        if m:
            out[f"{m.group(1)}{m.group(2)}"] = float(line.rpartition(" ")[2])
        m = re.match(r'nines_probe_sent_total\{.*partition="(\d)"', line)
        if m:
            out[f"sent{m.group(1)}"] = float(line.rpartition(" ")[2])
    return out


def window(fresh: EmbeddedBroker, tmp: Path, *args: str) -> dict[str, float]:
    """Per-second rates over WINDOW_S of one probe on the slow broker."""
    probe = ProbeProcess(
        fresh.bootstrap, f"ps-{uuid.uuid4().hex[:6]}", tmp, "--rate", str(RATE), *args
    )
    try:
        probe.ready()
        time.sleep(1.0)  # the 200 ms broker's queue settles
        a, t0 = counters(probe.port), time.monotonic()
        time.sleep(WINDOW_S)
        b, t1 = counters(probe.port), time.monotonic()
        probe.stop()
    finally:
        probe.kill()
    return {k: (b[k] - a.get(k, 0)) / (t1 - t0) for k in b}


def test_probe_producer_gathers_behind_5_in_flight_and_does_not_spin(
    fresh_broker: EmbeddedBroker, tmp_path: Path
) -> None:
    fresh_broker.rtt(1, 200)
    config = tmp_path / "idempotent.yaml"
    config.write_text('probe:\n  kafka:\n    enable.idempotence: "true"\n')
    with ThreadPoolExecutor(2) as pool:
        runs = [
            pool.submit(window, fresh_broker, tmp_path, *a) for a in ((), ("--config", str(config)))
        ]
        ours, idem = (r.result() for r in runs)
    print(f"\nper second: ours {ours}\nidempotent {idem}")
    # 5 requests in flight on a 200 ms connection: at most 25 a second (+ metadata requests)
    # carry partition 0's 300 messages; the fast brokers' take one request a message or so
    assert ours["sent0"] >= RATE * 0.8, ours
    assert ours["requests1"] <= 5 / 0.2 + 5, ours
    assert min(ours["requests2"], ours["requests3"]) >= 4 * ours["requests1"], ours
    # idempotent, the thread of the slow broker spins (a 0 ms poll while 5 requests wait)
    assert idem["wakeups1"] >= 50 * ours["wakeups1"], (ours, idem)
