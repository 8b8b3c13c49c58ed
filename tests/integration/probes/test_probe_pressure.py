"""The probe under pressure (issue 31): light when a broker is slow, stalled, down or restarting,
able to start whatever a broker's state, and truthful about it; the CTRL+Z calibration on a
freshly started Apache Kafka cluster, run as an operator runs it.

Every probe here is ``nines probe`` in its own process, as an operator starts it; its CPU is read
from /proc.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
from probe_runs import ProbeProcess, assert_one_echo_per_message, records_of

from bench.probe_pressure import stopped_for, window
from testbroker import EmbeddedBroker

#: Issue 31's bound on the CPU of a probe facing a slow, stalled, down or restarting broker, as
#: a multiple of its healthy CPU at the same rate; the assertion's margin (at most 2× the bound,
#: as the issue allows) absorbs this shared 2-core machine's noise: measured ratios were 0.8 to
#: 1.2 (bench.probe_pressure, docs/benchmarks.md).
CPU_BOUND = 1.5
CPU_ASSERTED = 2.0
#: Seconds a fault lasts; the window runs on this long after recovery (the issue's window).
FAULT_S = 4.0
AFTER_S = 10.0
#: SIGTERM waits this long for the messages in flight: past every loss timeout here (30 s at
#: most), so each ends received or declared lost before the probe stops. At the default (10 s)
#: a loaded run stopped the pressure probe with 2,053 still in flight (load 12, the receive
#: side seconds behind): counted ``unresolved``, but with no echo, as documented.
SHUTDOWN_TIMEOUT = "45s"


@pytest.fixture
def cli_probes(tmp_path: Path) -> Iterator[Callable[..., ProbeProcess]]:
    """``nines probe`` processes (probe_runs.ProbeProcess), killed at the end if still running."""
    started: list[ProbeProcess] = []

    def start(bootstrap: str, probe_id: str, *args: str) -> ProbeProcess:
        config = tmp_path / "shutdown.yaml"  # a config file's key: the CLI has no flag for it
        config.write_text(f"probe:\n  shutdown_timeout: {SHUTDOWN_TIMEOUT}\n")
        started.append(ProbeProcess(bootstrap, probe_id, tmp_path, "--config", str(config), *args))
        return started[-1]

    yield start
    for p in started:
        p.kill()


def accounted(totals: dict[str, int], echoes_n: dict[int, int]) -> None:
    """Every message the probe sent has exactly one echo: received or lost, never absent."""
    assert totals["sent"] == sum(echoes_n.values()), (totals, echoes_n)
    assert totals["sent"] == totals["received"] + totals["lost"] + totals["unresolved"], totals
    assert totals["echo_dropped"] == 0, totals


def test_a_slow_stalled_down_or_restarting_broker_costs_the_probe_little(
    fresh_broker: EmbeddedBroker, cli_probes: Callable[..., ProbeProcess]
) -> None:
    """librdkafka's idempotent producer spun at 0.9-1.8 cores on a 200 ms broker (issue 31);
    now each fault window (fault + 10 s) costs at most ``CPU_BOUND`` × a healthy window of the
    same length, at the same rate, in the same run. Every broker is slowed, so the echo
    producer's broker is too."""
    broker = fresh_broker
    probe = cli_probes(broker.bootstrap, "pressure", "--rate", "300", "--size", "512",
                       "--loss-timeout", "20s")  # fmt: skip
    time.sleep(3)
    span_s = FAULT_S + AFTER_S

    def every_broker(ms: int) -> Callable[[], None]:
        def go() -> None:
            for b in (1, 2, 3):
                broker.rtt(b, ms)
            time.sleep(FAULT_S)
            for b in (1, 2, 3):
                broker.rtt(b, 0)

        return go

    def stalled() -> None:  # the mock's brokers are one process: SIGSTOP stalls them all
        broker.pause()
        time.sleep(FAULT_S)
        broker.resume()

    def restarted() -> None:  # broker 1 down (connections dropped, refused), then back
        broker.down(1)
        time.sleep(FAULT_S)
        broker.up(1)

    healthy = [window(probe, span_s)]
    faulted = {}
    for name, go in (("slow 200 ms", every_broker(200)), ("slow 2 s", every_broker(2000)),
                     ("stalled", stalled), ("down, then up", restarted)):  # fmt: skip
        faulted[name] = window(probe, span_s, during=go)
    healthy.append(window(probe, span_s))
    ref = float(np.mean(healthy))
    ratios = {name: round(c / ref, 2) for name, c in faulted.items()}
    print(f"\nprobe CPU healthy {[round(h, 3) for h in healthy]} of a core; fault/healthy {ratios}")
    for name, ratio in ratios.items():
        assert ratio <= CPU_ASSERTED, (name, ratios, healthy)
    totals = probe.stop()
    echoes, _ = records_of(broker.bootstrap, "pressure", timeout_s=60)
    accounted(totals, assert_one_echo_per_message(echoes, 3))


def test_a_probe_started_while_a_broker_answers_in_2_s_starts_and_shows_it(
    fresh_broker: EmbeddedBroker, cli_probes: Callable[..., ProbeProcess]
) -> None:
    """It died with ``KafkaException: Failed to get offsets: Local: Timed out`` (issue 31)."""
    broker = fresh_broker
    broker.rtt(1, 2000)  # broker 1 leads partition 0
    t0 = time.monotonic()
    probe = cli_probes(broker.bootstrap, "slowstart", "--rate", "50", "--loss-timeout", "6s")
    time.sleep(14)
    assert probe.proc.poll() is None, probe.stderr()
    assert "log end of partitions [0] not known" in probe.stderr()
    t_clear_us = int(time.time() * 1e6)
    broker.rtt(1, 0)
    time.sleep(2)
    totals = probe.stop()
    assert time.monotonic() - t0 < 60
    echoes, _ = records_of(broker.bootstrap, "slowstart", timeout_s=60)
    accounted(totals, assert_one_echo_per_message(echoes, 3))
    # the slow broker's series shows its 2 s: publish latency from the intended time, of every
    # message sent while it was slow (by 2.5 s before it was cleared)
    while_slow = {
        p: [
            (e.acked_us - e.intended_us) / 1e6
            for e in echoes
            if e.partition == p and e.acked_us is not None and e.intended_us < t_clear_us - 2.5e6
        ]
        for p in (0, 1, 2)
    }
    assert len(while_slow[0]) >= 50 * 2, len(while_slow[0])  # the probe ran 2 s of it at least
    assert min(while_slow[0]) >= 1.9, min(while_slow[0])
    assert np.median(while_slow[1]) < 0.5 and np.median(while_slow[2]) < 0.5
    # its messages came back once the consumer found the log end, or count lost: never absent
    p0 = [e for e in echoes if e.partition == 0]
    assert any(not e.lost for e in p0), "partition 0 never read back"


def test_ctrl_z_on_a_fresh_kafka_cluster_as_an_operator_runs_it(
    require_kafka_jars: None, cli_probes: Callable[..., ProbeProcess]
) -> None:
    """Issue 31's path, which failed 4 of 4 times: a freshly started 3-broker Apache Kafka
    cluster, ``nines probe`` started as soon as ``nines broker`` says ready (default settings,
    150 msgs/s a partition, RF 1), then SIGSTOP of the broker leading partition 0 for D = 4 s.
    The stalled broker's partitions carry the stall exactly as the open-loop arithmetic says
    (R·D/2 messages above D/2 per partition); the other brokers' partitions stay under D/2.
    The probe's CPU over the stall stays within the bound too (no warm-up before it)."""
    rate, d_s = 150, 4.0
    topics = [("nines.probe", 6, 1), ("nines.echoes", 3, 1)]
    with EmbeddedBroker(engine="kafka", brokers=3, topics=topics) as kafka:
        probe = cli_probes(kafka.bootstrap, "ctrlzop", "--rate", str(rate), "--loss-timeout", "30s")
        from confluent_kafka.admin import AdminClient

        md = AdminClient({"bootstrap.servers": kafka.bootstrap}).list_topics(timeout=10)
        leaders = {p: pm.leader for p, pm in md.topics["nines.probe"].partitions.items()}
        stalled_broker = leaders[0]
        pid = kafka.broker_pid(stalled_broker)
        # the probe's first 15 s of probing (the path stalls then): the healthy CPU
        # window, measured from its ready line so that its start-up is not in it
        probe.started()
        time.sleep(max(0.0, 15 - (d_s + AFTER_S)))
        healthy_core = window(probe, d_s + AFTER_S)

        def stall() -> None:
            stopped_for(pid, d_s)

        t_stop_wall = time.time()
        stall_core = window(probe, d_s + AFTER_S, during=stall)
        totals = probe.stop()
        echoes, _ = records_of(kafka.bootstrap, "ctrlzop", timeout_s=90)
    accounted(totals, assert_one_echo_per_message(echoes, 6))
    stalled_parts = sorted(p for p, b in leaders.items() if b == stalled_broker)
    t_stop_us = int(t_stop_wall * 1e6)
    lat_s = {
        p: np.array([e.end_to_end_us for e in echoes if e.partition == p and not e.lost]) / 1e6
        for p in range(6)
    }
    figures = {
        p: (int((lat > d_s / 2).sum()), round(float(lat.max()), 3)) for p, lat in lat_s.items()
    }
    healthy_lat = np.concatenate([lat_s[p] for p in range(6) if p not in stalled_parts])
    floor_p99 = float(np.quantile(healthy_lat, 0.99))
    slow = {
        p: [
            round((e.intended_us - t_stop_us) / 1e6, 2)
            for e in echoes
            if e.partition == p and (e.end_to_end_us or 0) > d_s / 2 * 1e6
        ][:10]
        for p in range(6)
        if p not in stalled_parts
    }
    why = (figures, leaders, f"floor p99 {floor_p99:.3f} s", slow)
    for p in range(6):
        over = figures[p][0]
        if p in stalled_parts:
            # R·D/2 = 300 per stalled partition, exactly, from a stall that no probe can see
            # shorter; above it, the broker's and the probe's recovery after SIGCONT, and this
            # run's own floor (the check_ctrl_z tolerance: 0.5 s + floor p99 + 1/R)
            assert rate * d_s / 2 - 0.1 * rate <= over, (p, why)
            assert over <= rate * (d_s / 2 + 0.5 + floor_p99 + 1 / rate), (p, why)
        else:  # the other brokers' partitions never see the stall
            assert over == 0, (p, why)
    ratio = stall_core / healthy_core
    print(f"\nfresh Kafka CTRL+Z, broker {stalled_broker} stalled {d_s} s: (count>D/2, max s) "
          f"per partition {figures}; probe CPU {healthy_core:.3f} -> {stall_core:.3f} "
          f"({ratio:.2f}x)")  # fmt: skip
    assert ratio <= CPU_ASSERTED, (healthy_core, stall_core)


def test_a_probe_on_a_cold_kafka_cluster_stays_within_its_cpu_bound(
    require_kafka_jars: None, cli_probes: Callable[..., ProbeProcess]
) -> None:
    """The warm-up that `nines broker` does before ready must not be what keeps the probe light:
    here the cluster says ready without it (`--no-warm-up`), the probe starts at once, and a
    stall of one broker costs it no more than the bound against the healthy window before."""
    topics = [("nines.probe", 6, 1), ("nines.echoes", 3, 1)]
    with EmbeddedBroker(engine="kafka", brokers=3, topics=topics, warm_up=False) as kafka:
        probe = cli_probes(kafka.bootstrap, "cold", "--rate", "150", "--loss-timeout", "30s")
        probe.started()  # the healthy window holds none of its start-up
        healthy_core = window(probe, FAULT_S + AFTER_S)
        pid = kafka.broker_pid(1)

        def stall() -> None:
            stopped_for(pid, FAULT_S)

        stall_core = window(probe, FAULT_S + AFTER_S, during=stall)
        totals = probe.stop()
        echoes, _ = records_of(kafka.bootstrap, "cold", timeout_s=90)
    accounted(totals, assert_one_echo_per_message(echoes, 6))
    ratio = stall_core / healthy_core
    print(f"\ncold Kafka: probe CPU {healthy_core:.3f} -> {stall_core:.3f} ({ratio:.2f}x)")
    assert ratio <= CPU_ASSERTED, (healthy_core, stall_core)
