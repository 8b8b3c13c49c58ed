"""A running probe's /metrics (``nines probe``, the mock broker) answers every scrape within 1 s
while 1,100 connections from the scraper's own address (127.0.0.1) sit idle, trickle a request
head (or a TLS ClientHello) a byte a second, or stop mid-handshake, each reopened when cut: more
than twice the server's connection cap. The probe keeps its schedule meanwhile: its send lag's
p99.9 under the flood stays within 2x the figure of the same run without it. The probe started
under a soft open-file limit of 256, and raised it to the hard limit itself.
"""

from __future__ import annotations

import signal
import time
import uuid
from pathlib import Path

import bcrypt
import numpy as np
from kafka_cluster import Cluster
from metrics_flood import Flood, Scraper, raise_own_open_files
from probe_runs import ProbeProcess, records_of
from tls_material import make_tls

import runtime.webserver as ws
from core.echo import Echo
from probes.clock import ProbeClock

RATE = 300  # per partition per second: ~900 sends a second, so a p99.9 of a few seconds means
PHASE_S = 4.0  # seconds of each phase (healthy, flooded)
PLAIN = {"idle": 550, "trickle": 550}
TLS = {"idle": 400, "trickle": 300, "hello": 400}  # trickle: a ClientHello a byte a second
PASSWORD = "scrape-pass-42"


def soft_and_hard_nofile(pid: int) -> tuple[int, int]:
    for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
        if line.startswith("Max open files"):
            soft, hard = line.split()[3:5]
            return int(soft), int(hard)
    raise AssertionError("no open-file limit in /proc/PID/limits")


def send_lag_p999_ms(echoes: list[Echo], t0_us: int, t1_us: int) -> float:
    lags = [e.send_lag_us for e in echoes if t0_us <= e.intended_us < t1_us]
    assert len(lags) >= RATE * 3 * (t1_us - t0_us) / 1e6 * 0.9, len(lags)
    return float(np.quantile(np.array(lags), 0.999)) / 1e3


def run_flooded(broker: Cluster, tmp_path: Path, kinds: dict[str, int], tls: bool) -> None:
    assert sum(kinds.values()) >= max(2 * ws.MAX_CONNECTIONS, 1001)
    raise_own_open_files(sum(kinds.values()) + 500)
    args: list[str] = ["--rate", str(RATE)]
    ca, password = None, None
    if tls:
        material = make_tls(tmp_path / "tls")
        hashed = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(rounds=4)).decode()
        (tmp_path / "web.yml").write_text(
            f"tls_server_config:\n  cert_file: {material.cert}\n  key_file: {material.key}\n"
            f"basic_auth_users:\n  prometheus: '{hashed}'\n"
        )
        args += ["--web-config-file", str(tmp_path / "web.yml")]
        ca, password = material.ca, PASSWORD
    probe_id = f"flood-{uuid.uuid4().hex[:8]}"
    probe = ProbeProcess(broker.bootstrap, probe_id, tmp_path, *args, soft_nofile=256)
    clock = ProbeClock()
    try:
        if tls:  # ready() reads /metrics over plain HTTP
            ready = Scraper(probe.port, path="/-/ready", ca=ca, timeout_s=1)
            deadline = time.monotonic() + 30
            while not ready.up():
                assert probe.proc.poll() is None, probe.stderr()
                assert time.monotonic() < deadline, "the probe's /-/ready never answered"
                time.sleep(0.2)
            time.sleep(1.0)  # its first messages out and back
        else:
            probe.ready()
        soft, hard = soft_and_hard_nofile(probe.proc.pid)
        assert soft == hard, (soft, hard)  # raised from 256 at the probe's start
        healthy = Scraper(probe.port, ca=ca, password=password, every_s=0.2).start()
        h0 = clock.now_us()
        time.sleep(PHASE_S)
        h1 = clock.now_us()
        healthy.stop()
        flood = Flood(probe.port, kinds, duration_s=PHASE_S + 10, reopen_s=1.0, tls=tls)
        with flood:
            time.sleep(1.0)  # every flood connection opened, the cap reached
            scraper = Scraper(probe.port, ca=ca, password=password, every_s=0.2).start()
            f0 = clock.now_us()
            time.sleep(PHASE_S)
            f1 = clock.now_us()
            scraper.stop()
        seen = flood.stop()
        probe.proc.send_signal(signal.SIGTERM)
        assert probe.proc.wait(20) == 0, probe.stderr()[-2000:]
    finally:
        probe.kill()
    echoes, _ = records_of(broker.bootstrap, probe_id)
    lag_healthy, lag_flood = send_lag_p999_ms(echoes, h0, h1), send_lag_p999_ms(echoes, f0, f1)
    print(
        f"\n{'TLS' if tls else 'plain'} flood {kinds}: {seen}; healthy scrapes "
        f"{healthy.summary()}; flooded scrapes {scraper.summary()}; send lag p99.9 healthy "
        f"{lag_healthy:.2f} ms, flooded {lag_flood:.2f} ms"
    )
    # the flood was real: all of it open at once on the client's side, and cut and reopened
    assert seen["peak_open"] >= sum(kinds.values()) * 0.95, seen
    assert seen["cut"] >= sum(kinds.values()) - ws.MAX_CONNECTIONS, seen
    for scrapes in (healthy, scraper):
        assert len(scrapes.times_s) >= PHASE_S / 0.2 * 0.6, scrapes.summary()
        assert all(t is not None and t < 1.0 for t in scrapes.times_s), scrapes.summary()
    assert lag_flood <= 2 * lag_healthy, (lag_flood, lag_healthy)


def test_a_probes_plain_metrics_outlive_a_flood_and_its_schedule_holds(
    broker: Cluster, tmp_path: Path
) -> None:
    run_flooded(broker, tmp_path, PLAIN, tls=False)


def test_a_probes_tls_metrics_outlive_a_flood_of_idle_and_half_handshakes(
    broker: Cluster, tmp_path: Path
) -> None:
    run_flooded(broker, tmp_path, TLS, tls=True)
