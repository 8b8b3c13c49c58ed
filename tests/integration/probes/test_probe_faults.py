"""The probe against a real Kafka-protocol broker: the CTRL+Z calibration and injected faults."""

from __future__ import annotations

import contextlib
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import numpy as np

from monitor.broker import EmbeddedBroker
from monitor.broker.testing import consumer
from monitor.core.echo import Echo, decode_record
from probes import ProbeAgent, ProbeConfig
from probes.naive import NaiveProber

RATE = 100  # per partition per second


def echoes_of(bootstrap: str, probe_id: str, expect: int, timeout_s: float = 20) -> list[Echo]:
    """Every echo record of one probe, read back from the echo topic."""
    c = consumer(bootstrap)
    c.subscribe(["nines.echoes"])
    out: list[Echo] = []
    deadline = time.monotonic() + timeout_s
    while len(out) < expect and time.monotonic() < deadline:
        for m in c.consume(2000, 0.5):
            if m.error():
                continue
            rec = decode_record(m.value())
            if isinstance(rec, Echo) and rec.probe == probe_id:
                out.append(rec)
    c.close()
    return out


def probe(bootstrap: str, probe_id: str, **kw: object) -> ProbeAgent:
    cfg = dict(bootstrap=bootstrap, rate=RATE, metrics_port=0, probe_id=probe_id, cluster="t")
    cfg.update(kw)
    return ProbeAgent(ProbeConfig(**cfg)).start()  # type: ignore[arg-type]


def test_ctrl_z_calibration_open_loop_vs_naive(fresh_broker: EmbeddedBroker) -> None:
    stall_s = 2.5
    agent = probe(fresh_broker.bootstrap, "ctrlz")
    naive = NaiveProber(fresh_broker.bootstrap, "nines.probe", 0, interval_s=1 / RATE).start()
    time.sleep(3)
    fresh_broker.pause()
    time.sleep(stall_s)
    fresh_broker.resume()
    time.sleep(3)
    agent.stop()
    naive_us = np.array(naive.stop())
    sent = sum(p["sent"] for p in agent.stats()["partitions"].values())
    echoes = echoes_of(fresh_broker.bootstrap, "ctrlz", sent)
    # nothing missing: exactly one echo per message, every seq of every partition
    assert len(echoes) == sent
    for p in (0, 1, 2):
        seqs = sorted(e.seq for e in echoes if e.partition == p)
        assert seqs == list(range(len(seqs)))
    lat_s = np.array([e.end_to_end_us for e in echoes]) / 1e6
    # Open loop, analytically: a message intended t seconds into the stall waits ~S - t, so
    # rate x S/2 per partition exceed S/2 and the max is ~S. Tolerance: the measured figures
    # also carry the broker floor, client reconnect/back-off after SIGCONT (up to ~0.5 s here)
    # and scheduler jitter on a loaded 2-core machine, which can only add slow samples; so
    # [0.8, 1.8] x expected for the count, [0.9 S, S + 1.5 s] for the max.
    expected = 3 * RATE * stall_s / 2
    over_half = int((lat_s > stall_s / 2).sum())
    assert 0.8 * expected <= over_half <= 1.8 * expected, (over_half, expected)
    assert 0.9 * stall_s <= lat_s.max() <= stall_s + 1.5, lat_s.max()
    assert np.quantile(lat_s, 0.99) > stall_s / 2
    # The closed loop coordinated with the broker: one slow sample for the whole stall.
    naive_over = int((naive_us / 1e6 > stall_s / 2).sum())
    assert naive_over <= 2, naive_over
    assert over_half > 50 * max(naive_over, 1)


def test_rtt_shows_on_that_brokers_partition_only(fresh_broker: EmbeddedBroker) -> None:
    fresh_broker.rtt(2, 200)  # broker 2 leads partition 1
    agent = probe(fresh_broker.bootstrap, "rtt")
    time.sleep(4)
    agent.stop()
    sent = sum(p["sent"] for p in agent.stats()["partitions"].values())
    echoes = [e for e in echoes_of(fresh_broker.bootstrap, "rtt", sent) if not e.lost]
    med = {
        p: np.median([e.end_to_end_us for e in echoes if e.partition == p]) / 1e3 for p in (0, 1, 2)
    }
    assert med[1] >= 200, med
    assert med[0] < 100 and med[2] < 100, med
    assert {e.leader for e in echoes if e.partition == 1} == {2}


def test_leader_move_followed_and_down_broker_loses_then_recovers(
    fresh_broker: EmbeddedBroker,
) -> None:
    agent = probe(fresh_broker.bootstrap, "faults", loss_timeout="2s")
    time.sleep(2)
    fresh_broker.set_leader("nines.probe", 0, 2)
    time.sleep(3)
    fresh_broker.down(3)  # leads partition 2
    down_at_us = agent.clock.now_us()
    time.sleep(4)
    fresh_broker.up(3)
    up_at_us = agent.clock.now_us()
    time.sleep(6)
    agent.stop()
    stats = agent.stats()
    sent = sum(p["sent"] for p in stats["partitions"].values())
    echoes = echoes_of(fresh_broker.bootstrap, "faults", sent)
    assert len(echoes) == sent
    leaders0 = [e.leader for e in sorted(echoes, key=lambda e: e.seq) if e.partition == 0]
    assert leaders0[0] == 1 and leaders0[-1] == 2
    lost = [e for e in echoes if e.lost]
    assert lost and {e.partition for e in lost} == {2}
    assert all(e.end_to_end_us == 2_000_000 for e in lost)
    assert all(down_at_us - 3_000_000 <= e.intended_us <= up_at_us for e in lost)
    recovered = [
        e
        for e in echoes
        if e.partition == 2 and not e.lost and e.intended_us > up_at_us + 2_000_000
    ]
    assert recovered, "partition 2 did not recover after `up`"
    assert stats["partitions"][2]["lost"] == len(lost)


def test_echo_cluster_down_keeps_probing_and_counts_drops(fresh_broker: EmbeddedBroker) -> None:
    with EmbeddedBroker() as echo_cluster:
        agent = probe(
            fresh_broker.bootstrap,
            "echodown",
            echo_bootstrap=echo_cluster.bootstrap,
            echo_buffer=200,
        )
        time.sleep(2)
        echo_cluster.pause()
        sent_before = sum(p["sent"] for p in agent.stats()["partitions"].values())
        time.sleep(4)
        stats = agent.stats()
        echo_cluster.resume()
        assert sum(p["sent"] for p in stats["partitions"].values()) > sent_before + 600
        assert stats["echo_dropped"] > 0
        agent.stop(timeout_s=3)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_cli_sigterm_exits_clean_and_bad_config_exits_2(broker: EmbeddedBroker) -> None:
    port = free_port()
    cmd = [
        sys.executable,
        "-m",
        "monitor",
        "probe",
        "--bootstrap",
        broker.bootstrap,
        "--probe-id",
        "cli",
        "--metrics-port",
        str(port),
        "--rate",
        "50",
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        body = ""
        while time.monotonic() < deadline and "nines_probe_received_total{" not in body:
            time.sleep(0.5)
            with contextlib.suppress(OSError):
                body = (
                    urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2)
                    .read()
                    .decode()
                )
        assert "nines_probe_sent_total{" in body
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == 0, proc.stderr.read() if proc.stderr else ""
    finally:
        if proc.poll() is None:
            proc.kill()
    for args, field in (
        (["--topic", "no.such.topic"], "topic:"),
        (["--rate", "0"], "probe.rate"),
        (["--size", "2MiB"], "probe.size"),
    ):
        out = subprocess.run(
            [*cmd[:6], *args, "--metrics-port", "0"], capture_output=True, text=True, timeout=60
        )
        assert out.returncode == 2, out.stderr
        assert field in out.stderr.strip().splitlines()[-1]
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "monitor",
            "probe",
            "--bootstrap",
            "127.0.0.1:1",
            "--metrics-port",
            "0",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2 and "bootstrap:" in out.stderr
