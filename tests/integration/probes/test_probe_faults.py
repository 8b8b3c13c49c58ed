"""The probe against a real Kafka-protocol broker: the CTRL+Z calibration and injected faults."""

from __future__ import annotations

import contextlib
import gc
import os
import signal
import time
import uuid
from pathlib import Path

import numpy as np
from kafka_cluster import Cluster, consumer
from probe_runs import (
    RATE,
    ProbeProcess,
    assert_one_echo_per_message,
    check_ctrl_z,
    ctrl_z,
    probe_argv,
    records_of,
    run_cli,
)

from probes import ProbeAgent, ProbeConfig
from probes.clock import ProbeClock
from testbroker import EmbeddedBroker
from testkit.naive import NaiveProber


def probe(bootstrap: str, probe_id: str, **kw: object) -> ProbeAgent:
    cfg = dict(bootstrap=bootstrap, rate=RATE, metrics_port=0, probe_id=probe_id, cluster="t")
    cfg.update(kw)
    return ProbeAgent(ProbeConfig(**cfg)).start()  # type: ignore[arg-type]


def test_ctrl_z_calibration_open_loop_vs_naive(any_fresh_broker: EmbeddedBroker) -> None:
    fresh_broker = any_fresh_broker  # the mock, then Tansu: SIGSTOP stalls either
    agent = probe(fresh_broker.bootstrap, "ctrlz")
    naive = NaiveProber(fresh_broker.bootstrap, "nines.probe", 0, interval_s=1 / RATE).start()
    # Apache Kafka's three JVMs share the 2 cores with the probe: a longer stall keeps S/2
    # clear of their scheduling spikes (still under the brokers' 9 s session timeout)
    stall = ctrl_z(agent, fresh_broker, stall_s=4.0 if fresh_broker.engine == "kafka" else 2.5)
    naive_us = np.array(naive.stop())
    echoes, _ = records_of(fresh_broker.bootstrap, "ctrlz")
    check_ctrl_z(agent, echoes, stall, naive_us, acks=True)


def test_rtt_shows_on_that_brokers_partition_only(fresh_broker: EmbeddedBroker) -> None:
    fresh_broker.rtt(2, 200)  # broker 2 leads partition 1
    agent = probe(fresh_broker.bootstrap, "rtt")
    time.sleep(4)
    # the probe's receiver and this reader fetch from broker 2 too: with the RTT left on, the
    # stop waited out its 10 s for partition 1's backlog and the read its 20 s (25 s of 37)
    fresh_broker.rtt(2, 0)
    agent.stop()
    sent = sum(p["sent"] for p in agent.stats()["partitions"].values())
    echoes, _ = records_of(fresh_broker.bootstrap, "rtt")
    assert len(echoes) == sent, (len(echoes), sent)  # every message its echo: nothing left over
    echoes = [e for e in echoes if not e.lost]
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
    echoes, _ = records_of(fresh_broker.bootstrap, "faults")
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


def librdkafka_threads() -> int:
    """Threads of this process that belong to a librdkafka client."""
    n = 0
    for tid in os.listdir("/proc/self/task"):
        with contextlib.suppress(OSError), open(f"/proc/self/task/{tid}/comm") as f:
            n += f.read().startswith("rdk:")
    return n


def test_echo_cluster_down_keeps_probing_and_counts_drops(fresh_broker: EmbeddedBroker) -> None:
    clients_before = librdkafka_threads()
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
        assert librdkafka_threads() > clients_before
        # stop() releases its clients itself: none is left reconnecting until a GC pass (the
        # collector is off meanwhile, so it cannot be what freed them)
        gc.disable()
        try:
            agent.stop(timeout_s=10)  # room for the flush on a loaded machine
            deadline = time.monotonic() + 5  # (their threads may take a moment to exit)
            while librdkafka_threads() > clients_before and time.monotonic() < deadline:
                time.sleep(0.05)
            assert librdkafka_threads() == clients_before
        finally:
            gc.enable()
        # the echo cluster is back, so stop's flush delivered every echo it still held
        assert agent.stats()["echo_buffered"] == 0


def test_cli_sigterm_drains_in_flight_and_flushes_one_echo_per_message(
    fresh_broker: EmbeddedBroker, tmp_path: Path
) -> None:
    shutdown_s = 4.0
    (tmp_path / "nines.yaml").write_text(f"probe:\n  shutdown_timeout: {shutdown_s}s\n")
    clock = ProbeClock()  # the probe's timeline: same monotonic clock; anchors ~1 ms apart
    probe_ = ProbeProcess(
        fresh_broker.bootstrap, "flush", tmp_path, "--config", str(tmp_path / "nines.yaml")
    )
    try:
        probe_.ready()
        time.sleep(1)
        # Stop it while ~0.5 s of messages (and their echoes) are stuck in a stalled broker:
        # a probe that did not drain would exit at once and leave them without an echo.
        fresh_broker.pause()
        time.sleep(0.5)
        t_term = clock.now_us()
        probe_.proc.send_signal(signal.SIGTERM)
        time.sleep(1.0)
        t_resume = clock.now_us()
        fresh_broker.resume()
        rc = probe_.proc.wait(shutdown_s + 5)
        took_s = (clock.now_us() - t_term) / 1e6
    finally:
        fresh_broker.resume()
        probe_.kill()
    err = probe_.stderr()
    assert rc == 0, err
    # It waited for the stalled broker (1 s), and not beyond the shutdown timeout (+1 s for
    # joining threads and the final flush, +1 s for exiting a loaded machine).
    assert 1.0 <= took_s <= shutdown_s + 2, took_s
    assert "lead no partition" not in err  # every broker leads one partition here
    counts = probe_.summary()
    assert counts, err

    echoes, hiccups = records_of(fresh_broker.bootstrap, "flush")
    n = assert_one_echo_per_message(echoes, 3)
    assert sum(n.values()) == counts["sent"] == counts["received"]
    assert counts["lost"] == counts["unresolved"] == counts["echo_dropped"] == 0
    assert not [e for e in echoes if e.lost or e.acked_us is None]
    assert len(echoes) + len(hiccups) == counts["echo_records_published"]
    # the messages in flight at SIGTERM were drained: received after the broker came back...
    drained = [
        e
        for e in echoes
        if e.intended_us < t_term and e.received_us is not None and e.received_us > t_resume
    ]
    assert len(drained) >= 0.4 * 3 * RATE, len(drained)
    # ...and nothing was scheduled after the stop (SIGTERM is seen within 0.2 s)
    assert max(e.intended_us for e in echoes) < t_term + 500_000
    print(f"\nSIGTERM: exit after {took_s:.2f}s, {counts}, drained after resume: {len(drained)}")


def test_probe_pause_shows_as_hiccup_and_send_lag_not_broker_latency(
    broker: Cluster, tmp_path: Path
) -> None:
    probe_id = f"hiccup-{uuid.uuid4().hex[:8]}"
    clock = ProbeClock()  # the probe's timeline: same monotonic clock; anchors ~1 ms apart
    tol_us = 50_000  # the two anchors, and SIGSTOP/SIGCONT taking effect
    probe_ = ProbeProcess(broker.bootstrap, probe_id, tmp_path)
    try:
        probe_.ready()
        time.sleep(1.5)
        os.kill(probe_.proc.pid, signal.SIGSTOP)  # the probe stalls, not the broker
        t_stop = clock.now_us()
        time.sleep(2.0)
        t_cont = clock.now_us()
        os.kill(probe_.proc.pid, signal.SIGCONT)
        time.sleep(2.0)
        probe_.proc.send_signal(signal.SIGTERM)
        rc = probe_.proc.wait(20)
    finally:
        probe_.kill()
    assert rc == 0, probe_.stderr()
    pause_us = t_cont - t_stop
    echoes, hiccups = records_of(broker.bootstrap, probe_id)

    # The hiccup meter saw the whole pause, in the interval that holds it, and only there.
    big = [h for h in hiccups if h.max_us >= 0.9 * pause_us]
    assert len(big) == 1, [h.max_us for h in hiccups]
    h = big[0]
    assert h.start_us <= t_stop + tol_us and h.end_us >= t_cont - tol_us, (h, t_stop, t_cont)
    # it slept through at least the time the process was stopped; +0.5 s for waking up loaded
    assert pause_us - tol_us <= h.max_us <= pause_us + 500_000, (h.max_us, pause_us)
    assert h.total_us >= h.max_us
    assert all(x.max_us < 1_000_000 for x in hiccups if x is not h), hiccups

    # Messages intended during the pause were sent only after SIGCONT, with their intended
    # times (open loop: not skipped, not re-timed): the stall is in the send lag...
    assert_one_echo_per_message(echoes, 3)
    paused = [e for e in echoes if t_stop + tol_us <= e.intended_us < t_cont - tol_us]
    assert len(paused) >= 3 * RATE * (pause_us - 2 * tol_us) / 1e6 - 3, len(paused)
    assert all(e.sent_us >= t_cont - tol_us for e in paused)
    early = [e for e in paused if e.intended_us <= t_cont - 1_500_000]
    assert len(early) >= 3 * RATE * (pause_us - 1_500_000 - tol_us) / 1e6 - 3, len(early)
    assert min(e.send_lag_us for e in early) >= 1_500_000
    # ...while the broker answered at once: acked and received right after sending (a broker
    # stall would show the opposite: small send lag, late ack and receipt; see CTRL+Z above).
    after_send_s = np.array([(e.received_us or 0) - e.sent_us for e in paused]) / 1e6
    ack_s = np.array([(e.acked_us or 0) - e.sent_us for e in paused]) / 1e6
    assert not [e for e in paused if e.lost or e.acked_us is None]
    assert np.median(after_send_s) < 0.25 and after_send_s.max() < 1.0, after_send_s.max()
    assert np.median(ack_s) < 0.25 and ack_s.max() < 1.0, ack_s.max()
    print(
        f"\nprobe pause {pause_us / 1e6:.3f}s: hiccup max={h.max_us / 1e6:.3f}s, others <="
        f"{max((x.max_us for x in hiccups if x is not h), default=0) / 1e3:.0f}ms; "
        f"send lag min (first {len(early)})={min(e.send_lag_us for e in early) / 1e6:.3f}s; "
        f"sent->received p50/max={np.median(after_send_s) * 1e3:.0f}/"
        f"{after_send_s.max() * 1e3:.0f}ms, sent->acked p50/max={np.median(ack_s) * 1e3:.0f}/"
        f"{ack_s.max() * 1e3:.0f}ms"
    )


def test_cli_limits_and_bad_config_exit_2_naming_the_field(broker: Cluster) -> None:
    c = consumer(broker.bootstrap)
    parts = len(c.list_topics("nines.probe", timeout=10).topics["nines.probe"].partitions)
    c.close()
    base = probe_argv(broker.bootstrap, "limits")
    # the hard limit is on the total, rate x partitions: just over it fails, naming `rate`...
    over = 20_000 // parts + 1
    out = run_cli([*base, "--rate", str(over)])
    assert out.returncode == 2, out.stderr
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith("nines probe: error: rate: "), last
    assert f"{over * parts}/s exceeds the limit of 20000/s" in last, last
    # ...while just under it is accepted (a zero duration sends nothing: no load to create)
    under = 20_000 // parts
    out = run_cli([*base, "--rate", str(under), "--duration", "0s"])
    assert out.returncode == 0, out.stderr
    for args, field in (
        (["--rate", "-5"], "probe.rate"),
        (["--rate=-0.5/s"], "probe.rate"),
        (["--rate", "0"], "probe.rate"),
        (["--topic", "no.such.topic"], "topic:"),
        (["--size", "2MiB"], "probe.size"),
    ):
        out = run_cli([*base, *args])
        assert out.returncode == 2, (args, out.stderr)
        assert field in out.stderr.strip().splitlines()[-1], (args, out.stderr)
    out = run_cli(probe_argv("127.0.0.1:1", "nobroker"))
    assert out.returncode == 2 and "bootstrap:" in out.stderr.strip().splitlines()[-1]


def test_warns_when_a_broker_leads_no_partition(fresh_broker: EmbeddedBroker) -> None:
    for p in range(3):
        fresh_broker.set_leader("nines.probe", p, 1)
    out = run_cli(probe_argv(fresh_broker.bootstrap, "idle", "--duration", "1s"))
    assert out.returncode == 0, out.stderr
    warnings = [line for line in out.stderr.splitlines() if "lead no partition" in line]
    assert len(warnings) == 1, out.stderr
    assert "WARNING" in warnings[0]
    assert "brokers [2, 3] lead no partition of nines.probe" in warnings[0]
    # still probing every partition, all through broker 1
    echoes, _ = records_of(fresh_broker.bootstrap, "idle")
    assert_one_echo_per_message(echoes, 3)
    assert {e.leader for e in echoes} == {1}
