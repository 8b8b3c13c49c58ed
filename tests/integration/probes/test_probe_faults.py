"""The probe against a real Kafka-protocol broker: the CTRL+Z calibration and injected faults."""

from __future__ import annotations

import contextlib
import gc
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

import numpy as np
from kafka_cluster import Cluster, consumer

from core.echo import Echo, Hiccup, decode_record
from probes import ProbeAgent, ProbeConfig
from probes.clock import ProbeClock
from probes.naive import NaiveProber
from probes.schedule import Schedule
from testbroker import EmbeddedBroker

RATE = 100  # per partition per second
ROOT = Path(__file__).resolve().parents[3]


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


def records_of(
    bootstrap: str, probe_id: str, timeout_s: float = 20
) -> tuple[list[Echo], list[Hiccup]]:
    """Every record of one probe on the echo topic, read to its end: nothing is missed or
    collapsed, so duplicates show. Call it after the probe has stopped (and flushed).

    The end is where a Fetch finds it (partition EOF), past ListOffsets' high watermark, which
    on Tansu 0.6.0 stops at the last record batch's base offset + 1 (docs/brokers.md)."""
    from confluent_kafka import OFFSET_BEGINNING, KafkaError, TopicPartition

    c = consumer(bootstrap, **{"enable.partition.eof": True})
    parts = sorted(c.list_topics("nines.echoes", timeout=10).topics["nines.echoes"].partitions)
    todo = {}
    for p in parts:
        low, high = c.get_watermark_offsets(TopicPartition("nines.echoes", p), timeout=10)
        if high > low:
            todo[p] = high
    c.assign([TopicPartition("nines.echoes", p, OFFSET_BEGINNING) for p in todo])
    echoes: list[Echo] = []
    hiccups: list[Hiccup] = []
    deadline = time.monotonic() + timeout_s
    while todo:
        assert time.monotonic() < deadline, f"echo topic not read to its end: {todo}"
        for m in c.consume(2000, 0.5):
            if m.error():
                eof = m.error().code() == KafkaError._PARTITION_EOF
                if eof and m.offset() >= todo.get(m.partition(), 0):
                    todo.pop(m.partition(), None)
                continue
            rec = decode_record(m.value())
            if rec.probe == probe_id:
                (echoes if isinstance(rec, Echo) else hiccups).append(rec)
    c.close()
    return echoes, hiccups


def probe(bootstrap: str, probe_id: str, **kw: object) -> ProbeAgent:
    cfg = dict(bootstrap=bootstrap, rate=RATE, metrics_port=0, probe_id=probe_id, cluster="t")
    cfg.update(kw)
    return ProbeAgent(ProbeConfig(**cfg)).start()  # type: ignore[arg-type]


def slots_before(schedule: Schedule, partition: int, t_us: int) -> int:
    """How many messages of ``partition`` the open-loop schedule intends before ``t_us``."""
    k = int((t_us - schedule.t0_us) * schedule.rate_per_s / 1e6) + 2
    while k > 0 and schedule.intended_us(partition, k - 1) >= t_us:
        k -= 1
    return k


class Mixture:
    """A weighted sample (values, weight of each): an expected distribution's quantiles."""

    def __init__(self, parts: list[tuple[np.ndarray, float]]) -> None:
        values = np.concatenate([v for v, _ in parts])
        weights = np.concatenate([np.full(len(v), w) for v, w in parts])
        order = np.argsort(values, kind="stable")
        self.values, self.weights = values[order], weights[order]
        self.cum = np.cumsum(self.weights) / self.weights.sum()

    def quantile(self, q: float) -> float:
        return float(self.values[min(int(np.searchsorted(self.cum, q)), len(self.values) - 1)])

    def count_over(self, x: float) -> float:
        return float(self.weights[self.values > x].sum())


def test_ctrl_z_calibration_open_loop_vs_naive(any_fresh_broker: EmbeddedBroker) -> None:
    fresh_broker = any_fresh_broker  # the mock, then Tansu: SIGSTOP stalls either
    stall_s = 2.5
    agent = probe(fresh_broker.bootstrap, "ctrlz")
    naive = NaiveProber(fresh_broker.bootstrap, "nines.probe", 0, interval_s=1 / RATE).start()
    time.sleep(3)
    # agent.clock reads time.monotonic_ns (anchored once to wall time): the stamps below are on
    # the echoes' own timeline. The broker is certainly stopped from just after SIGSTOP was sent
    # until just before SIGCONT is, so S is a lower bound of the stall, exact to a few µs.
    fresh_broker.pause()
    t_stop = agent.clock.now_us()
    time.sleep(stall_s)
    t_resume = agent.clock.now_us()
    fresh_broker.resume()
    time.sleep(3)
    t_end = agent.clock.now_us()
    agent.stop()
    t_stopped = agent.clock.now_us()
    naive_us = np.array(naive.stop())
    stats = agent.stats()
    echoes, _ = records_of(fresh_broker.bootstrap, "ctrlz")
    sched, parts = agent.schedule, agent.partitions
    s_us = t_resume - t_stop
    s = s_us / 1e6

    # -- nothing missing, nothing re-timed ----------------------------------------------------
    # Open loop: every slot of the schedule up to the stop was sent (a closed loop would be
    # ~R·S short per partition), none early; the sender may trail by 0.2 s on a loaded machine.
    n = {p: sched.next_seq[p] for p in parts}
    for p in parts:
        assert stats["partitions"][p]["sent"] == n[p]
        assert slots_before(sched, p, t_end) - 0.2 * RATE <= n[p], (p, n[p])
        assert n[p] <= slots_before(sched, p, t_stopped), (p, n[p])
        seqs = sorted(e.seq for e in echoes if e.partition == p)
        assert seqs == list(range(n[p])), f"partition {p}: seqs are not exactly 0..{n[p] - 1}"
    assert len(echoes) == sum(n.values())
    assert not [e for e in echoes if e.lost]
    assert all(e.acked_us is not None for e in echoes)  # each echo waited for its ack
    by_key = {(e.partition, e.seq): e for e in echoes}
    for e in echoes:  # the intended times are the schedule's, never re-stamped
        assert e.intended_us == sched.intended_us(e.partition, e.seq)

    # -- the analytic open-loop expectation ---------------------------------------------------
    # A message intended at t in [t_stop, t_resume) cannot come back before t_resume: it waits
    # out the rest of the stall, S - (t - t_stop), plus the floor. The schedule (not the probe's
    # output) says which messages those are: R·S per partition. Everything else is the floor.
    stall_keys = [
        (p, k)
        for p in parts
        for k in range(slots_before(sched, p, t_stop), slots_before(sched, p, t_resume))
    ]
    for p in parts:
        assert abs(sum(1 for q, _ in stall_keys if q == p) - RATE * s) <= 1
    lat_s = np.array([e.end_to_end_us for e in echoes]) / 1e6
    # The floor: this run's own latencies away from the stall and its edges.
    floor_s = (
        np.array(
            [
                e.end_to_end_us
                for e in echoes
                if not t_stop - 500_000 <= e.intended_us < t_resume + 500_000
            ]
        )
        / 1e6
    )
    floor_med, floor_p99 = np.quantile(floor_s, [0.5, 0.99])
    ramp_s = np.array([(t_resume - sched.intended_us(p, k)) / 1e6 for p, k in stall_keys])
    n_total = sum(slots_before(sched, p, t_end) for p in parts)  # the run, per the schedule
    n_floor = (n_total - len(ramp_s)) / len(floor_s)  # weight of each floor sample
    # The expected distribution of the run, numerically: n_total - len(ramp) floor samples, and
    # each stalled message's rest of the stall plus a floor sample (all combinations, equally
    # weighted). Nothing in it is a measured stalled latency.
    conv_s = (ramp_s[:, None] + floor_s[None, :]).ravel()
    expected = Mixture([(floor_s, n_floor), (conv_s, 1 / len(floor_s))])
    # And the least any probe without coordinated omission can measure: the rest of the stall
    # alone (exact: nothing comes back from a stopped broker).
    least = Mixture([(floor_s, n_floor), (ramp_s, 1.0)])
    # Tolerances:
    # - below: `least`, minus the schedule's granularity 1/R (one message per partition);
    # - above: after SIGCONT the broker and the probe drain a backlog of R·S messages per
    #   partition (the mock serves one message set per fetch: ~40-70 ms seen), and scheduling
    #   on the shared 2-core machine adds its own spikes: allow 0.5 s plus this run's floor p99
    #   (~12 ms idle, ~0.35-0.45 s seen at load average 4-12). A shift of d seconds moves R·d
    #   messages per partition across a threshold.
    # Coordinated omission misses by far more: a closed-loop, re-timing probe (tried: a mutant
    # of this probe) puts 1 sample above S/2 instead of ~R·S/2 per partition, and its p99 at
    # the floor (11 ms), 2.4 s below `least`.
    grain_s = 1 / RATE
    above_s = 0.5 + floor_p99 + grain_s
    stalled = [by_key[k] for k in stall_keys]
    for e in stalled:  # per message: the ramp itself
        assert e.received_us is not None and e.received_us >= t_resume, e
        assert e.received_us - t_resume <= above_s * 1e6, e
    send_lag_s = np.array([e.send_lag_us for e in stalled]) / 1e6
    # The probe itself kept to its schedule through the broker's stall (a probe that blocked
    # on produce would show ~S here; test_probe_pause_* shows the opposite case).
    assert np.median(send_lag_s) < 0.1 and send_lag_s.max() < s / 2, send_lag_s.max()

    per_s = len(parts) * RATE  # messages per second of shift, all partitions
    over = int((lat_s > s / 2).sum())
    exp_over, least_over = expected.count_over(s / 2), least.count_over(s / 2)
    analytic_over = per_s * s / 2  # R·S/2 per partition
    assert abs(least_over - analytic_over) <= len(parts), least_over
    assert abs(exp_over - analytic_over) <= per_s * (floor_p99 + grain_s), exp_over
    assert least_over - len(parts) <= over <= exp_over + per_s * above_s, (over, exp_over)
    figures = {"count>S/2": (round(exp_over, 1), over, round(least_over, 1))}
    for name, q in (("p99", 0.99), ("p99.9", 0.999)):
        exp_q, got_q, least_q = (
            expected.quantile(q),
            float(np.quantile(lat_s, q)),
            least.quantile(q),
        )
        figures[name] = (round(exp_q, 4), round(got_q, 4), round(least_q, 4))
        assert least_q - grain_s <= got_q <= exp_q + above_s, (name, exp_q, got_q, least_q)
    # The max: ≈ S + floor. At least the longest rest of a stall (exact: the first message
    # intended after SIGSTOP, within 1/R of it); above, as for the ramp.
    exp_max, got_max = s + floor_med, float(lat_s.max())
    figures["max"] = (round(exp_max, 4), round(got_max, 4), round(float(ramp_s.max()), 4))
    assert ramp_s.max() >= s - grain_s
    assert ramp_s.max() <= got_max <= exp_max + above_s, (exp_max, got_max)
    print(
        f"\nCTRL+Z S={s:.4f}s n={len(echoes)} stalled={len(stalled)} floor p50/p99="
        f"{floor_med * 1e3:.1f}/{floor_p99 * 1e3:.1f}ms analytic count>S/2={analytic_over:.0f} "
        f"(expected, measured, least): {figures} above<={above_s * 1e3:.0f}ms; recovery max="
        f"{max((e.received_us or 0) - t_resume for e in stalled) / 1e3:.1f}ms"
    )

    # -- the closed loop coordinated with the broker: one slow sample for the whole stall ----
    naive_over = int((naive_us / 1e6 > s / 2).sum())
    assert naive_over <= 2, naive_over
    assert over > 50 * max(naive_over, 1)


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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def nines_probe(bootstrap: str, probe_id: str, *args: str) -> list[str]:
    """argv of ``nines probe`` on ``bootstrap`` (metrics off unless ``args`` say otherwise)."""
    return [
        sys.executable,
        "-m",
        "monitor",
        "probe",
        "--bootstrap",
        bootstrap,
        "--probe-id",
        probe_id,
        "--metrics-port",
        "0",
        *args,
    ]


def run_cli(argv: list[str], timeout_s: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, cwd=ROOT)


def received_total(port: int) -> int:
    """``nines_probe_received_total`` over all partitions on the probe's /metrics (0 if down)."""
    try:
        body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2).read()
    except OSError:
        return 0
    found = re.findall(rb"^nines_probe_received_total\{[^}]*\} (\S+)$", body, re.M)
    return int(sum(float(v) for v in found))


class ProbeProcess:
    """``nines probe`` as a subprocess; stderr goes to a file (a pipe nobody reads could fill
    up and block the probe), and ``ready()`` waits until messages come back."""

    def __init__(self, bootstrap: str, probe_id: str, tmp: Path, *args: str) -> None:
        self.port = free_port()
        self.err_path = tmp / f"{probe_id}.stderr"
        argv = nines_probe(bootstrap, probe_id, "--rate", str(RATE), *args)
        argv[argv.index("--metrics-port") + 1] = str(self.port)
        with self.err_path.open("w") as err:
            self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err, cwd=ROOT)

    def ready(self, timeout_s: float = 30) -> None:
        deadline = time.monotonic() + timeout_s
        while received_total(self.port) < RATE:
            assert self.proc.poll() is None, self.stderr()
            assert time.monotonic() < deadline, "probe not receiving its messages"
            time.sleep(0.2)

    def stderr(self) -> str:
        return self.err_path.read_text(errors="replace")

    def kill(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.proc.pid, signal.SIGCONT)
            self.proc.kill()
            self.proc.wait(10)


SUMMARY = re.compile(
    r"stopped: sent=(?P<sent>\d+) received=(?P<received>\d+) lost=(?P<lost>\d+) "
    r"unresolved=(?P<unresolved>\d+) echo_records_published=(?P<published>\d+) "
    r"echo_dropped=(?P<dropped>\d+)"
)


def assert_one_echo_per_message(echoes: list[Echo], partitions: int) -> dict[int, int]:
    """Per partition, the seqs are exactly 0..n-1, each once; returns n per partition."""
    n = {}
    for p in range(partitions):
        seqs = sorted(e.seq for e in echoes if e.partition == p)
        assert seqs, f"partition {p} was not probed"
        assert seqs == list(range(len(seqs))), f"partition {p}: gaps or duplicate echoes"
        n[p] = len(seqs)
    assert len(echoes) == sum(n.values())
    return n


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
    summary = SUMMARY.search(err)
    assert summary is not None, err
    counts = {k: int(v) for k, v in summary.groupdict().items()}

    echoes, hiccups = records_of(fresh_broker.bootstrap, "flush")
    n = assert_one_echo_per_message(echoes, 3)
    assert sum(n.values()) == counts["sent"] == counts["received"]
    assert counts["lost"] == counts["unresolved"] == counts["dropped"] == 0
    assert not [e for e in echoes if e.lost or e.acked_us is None]
    assert len(echoes) + len(hiccups) == counts["published"]
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
    base = nines_probe(broker.bootstrap, "limits")
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
    out = run_cli(nines_probe("127.0.0.1:1", "nobroker"))
    assert out.returncode == 2 and "bootstrap:" in out.stderr.strip().splitlines()[-1]


def test_warns_when_a_broker_leads_no_partition(fresh_broker: EmbeddedBroker) -> None:
    for p in range(3):
        fresh_broker.set_leader("nines.probe", p, 1)
    out = run_cli(nines_probe(fresh_broker.bootstrap, "idle", "--duration", "1s"))
    assert out.returncode == 0, out.stderr
    warnings = [line for line in out.stderr.splitlines() if "lead no partition" in line]
    assert len(warnings) == 1, out.stderr
    assert "WARNING" in warnings[0]
    assert "brokers [2, 3] lead no partition of nines.probe" in warnings[0]
    # still probing every partition, all through broker 1
    echoes, _ = records_of(fresh_broker.bootstrap, "idle")
    assert_one_echo_per_message(echoes, 3)
    assert {e.leader for e in echoes} == {1}
