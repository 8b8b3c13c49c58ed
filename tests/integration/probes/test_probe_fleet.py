"""A probe fleet on a 3-broker Apache Kafka: replicas of the real ``nines probe --fleet-group``
share a 6-partition topic through their consumer group, through a SIGKILL, a restart, and
scaling 3 → 2 → 4 (docs/deploy.md, "A probe fleet").

Judged from what the replicas wrote, never from their word alone:
- every partition probed again within 30 s: from the probe topic itself, every message any
  replica sent, read back in the end; the longest gap between two intended send times of a
  partition is its unprobed time (a killed replica's last unsent messages only lengthen it);
- exactly-once accounting: every replica that stopped cleanly has sent = received + lost +
  unresolved + handoff_lost, none lost (a healthy cluster), one echo per message it received
  or lost, and no more received than the topic holds of its messages.
"""

from __future__ import annotations

import itertools
import os
import re
import signal
import time
import urllib.request
import uuid
from collections import defaultdict
from pathlib import Path

import numpy as np
from kafka_cluster import consumer
from probe_runs import ProbeProcess, records_of

from probes.payload import decode, probe_hash
from testbroker import EmbeddedBroker

PARTITIONS = 6
RATE = "20"  # per partition: 120 msgs/s over the fleet, light on a shared 2-core machine
#: The issue's bound on a partition's unprobed time at a handoff.
REPROBED_S = 30.0


def scrape(port: int) -> bytes:
    try:
        return bytes(urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2).read())
    except OSError:
        return b""


def last_sent(replicas: list[ProbeProcess]) -> dict[int, float]:
    """Partition → the latest send of any of ``replicas`` to it (Unix time), from /metrics."""
    out: dict[int, float] = {}
    pattern = (
        rb'^nines_probe_partition_last_sent_timestamp_seconds\{[^}]*partition="(\d+)"[^}]*\} (\S+)$'
    )
    for r in replicas:
        for p, t in re.findall(pattern, scrape(r.port), re.M):
            out[int(p)] = max(out.get(int(p), 0.0), float(t))
    return out


def shares(replicas: list[ProbeProcess]) -> list[set[int]]:
    """The partitions each of ``replicas`` says it probes now."""
    pattern = rb'^nines_probe_partition_probed\{[^}]*partition="(\d+)"[^}]*\} 1\.0$'
    return [{int(p) for p in re.findall(pattern, scrape(r.port), re.M)} for r in replicas]


def all_probed_since(replicas: list[ProbeProcess], t: float, timeout_s: float = 90) -> float:
    """Seconds from ``t`` until the group is balanced (each partition probed by exactly one of
    ``replicas``, each of them probing one at least) and every partition was sent to since."""
    deadline = time.time() + timeout_s
    balanced_at = None
    while True:
        held = shares(replicas)
        flat = sorted(p for h in held for p in h)
        if balanced_at is None and flat == list(range(PARTITIONS)) and all(held):
            balanced_at = time.time()
        sent = last_sent(replicas)
        if balanced_at is not None and all(sent.get(p, 0) > balanced_at for p in range(6)):
            return time.time() - t
        for r in replicas:
            assert r.proc.poll() is None, r.stderr()
        assert time.time() < deadline, f"not all probed again: {held} {sent}"
        time.sleep(0.2)


def gaps(bootstrap: str, topic: str) -> dict[int, tuple[float, float]]:
    """Partition → (the longest gap between consecutive intended sends, when it began), over
    every message on the topic, whoever sent it."""
    from confluent_kafka import OFFSET_BEGINNING, TopicPartition

    c = consumer(bootstrap)
    ends = {}
    for p in range(PARTITIONS):
        ends[p] = c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
    c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    times: dict[int, list[int]] = defaultdict(list)
    seen = dict.fromkeys(range(PARTITIONS), 0)
    deadline = time.monotonic() + 60
    while any(seen[p] < ends[p] for p in seen):
        assert time.monotonic() < deadline, (seen, ends)
        for m in c.consume(5000, 0.5):
            if m.error():
                continue
            seen[m.partition()] = m.offset() + 1
            head = decode(m.value())
            assert head is not None and head.partition == m.partition()
            times[m.partition()].append(head.intended_us)
    c.close()
    out = {}
    for p, ts in times.items():
        ts.sort()
        gap, at = max((b - a, a) for a, b in itertools.pairwise(ts))
        out[p] = (gap / 1e6, at / 1e6)
    return out


def messages_by_probe(bootstrap: str, topic: str) -> dict[bytes, int]:
    """Probe hash → its messages on the topic."""
    from confluent_kafka import OFFSET_BEGINNING, TopicPartition

    c = consumer(bootstrap)
    ends = {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(6)}
    c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    seen, out = dict.fromkeys(range(PARTITIONS), 0), defaultdict(int)
    while any(seen[p] < ends[p] for p in seen):
        for m in c.consume(5000, 0.5):
            if not m.error():
                seen[m.partition()] = m.offset() + 1
                out[decode(m.value()).probe] += 1  # type: ignore[union-attr]
    c.close()
    return out


def stop_all(live: dict[str, ProbeProcess]) -> dict[str, dict[str, int]]:
    """SIGTERM every replica of ``live`` at once (one each, as a rollout's end or a scale to 0
    sends them), each must exit 0 without a traceback; their summaries by name. ``live`` is
    emptied as they stop, so a failure leaves the rest to the caller's kill."""
    for r in live.values():
        r.proc.send_signal(signal.SIGTERM)
    stopped = {}
    for name in list(live):
        r = live.pop(name)
        status = r.proc.wait(60)
        assert status == 0 and "Traceback" not in r.stderr(), (status, r.stderr())
        stopped[name] = r.summary()
    return stopped


def test_a_fleet_reprobes_every_partition_and_accounts_for_every_message(
    kafka_broker: EmbeddedBroker, tmp_path: Path
) -> None:
    run_fleet(kafka_broker, tmp_path)


def run_fleet(kafka_broker: EmbeddedBroker, tmp_path: Path) -> None:
    """SIGKILL, restart, 3 → 2 → 4, judged as the module says."""
    tag = uuid.uuid4().hex[:6]
    topic = f"fleet.{tag}"
    kafka_broker.create_topic(topic, PARTITIONS, 1)
    args = ("--topic", topic, "--fleet-group", tag, "--rate", RATE, "--cluster", f"fleet-{tag}")

    def start(name: str) -> ProbeProcess:
        return ProbeProcess(kafka_broker.bootstrap, f"{tag}-{name}", tmp_path, *args)

    live = {n: start(n) for n in ("a", "b", "c")}
    stopped: dict[str, dict[str, int]] = {}
    took: dict[str, float] = {}
    marks: dict[str, float] = {}
    try:
        took["start 3"] = all_probed_since(list(live.values()), time.time())
        marks["kill"] = time.time()
        live.pop("b").proc.send_signal(signal.SIGKILL)
        took["SIGKILL b"] = all_probed_since(list(live.values()), marks["kill"])
        marks["restart"] = time.time()
        live["b2"] = start("b2")
        took["restart b"] = all_probed_since(list(live.values()), marks["restart"])
        marks["3 -> 2"] = time.time()
        stopped["c"] = live.pop("c").stop()
        took["3 -> 2"] = all_probed_since(list(live.values()), marks["3 -> 2"])
        marks["2 -> 4"] = time.time()
        live |= {n: start(n) for n in ("d", "e")}
        took["2 -> 4"] = all_probed_since(list(live.values()), marks["2 -> 4"])
        time.sleep(2)
        stopped |= stop_all(live)
    finally:
        for r in live.values():
            r.kill()
    print(f"\nfleet: seconds until every partition was probed again: {took}")
    longest = gaps(kafka_broker.bootstrap, topic)
    print(f"fleet: longest gap per partition (s, at): {longest}")
    assert set(longest) == set(range(PARTITIONS))
    assert max(g for g, _ in longest.values()) < REPROBED_S, longest
    # the longest gaps are the killed replica's partitions, waiting for its session to time out:
    # their gap spans the kill (it may begin before: a sender behind its schedule sends late)
    killed = [p for p, (gap, at) in longest.items() if at <= marks["kill"] <= at + gap]
    assert killed, (longest, marks)

    on_topic = messages_by_probe(kafka_broker.bootstrap, topic)
    handed_off = 0
    for name, totals in stopped.items():
        assert totals, f"{name} wrote no summary"
        probe_id = f"{tag}-{name}"
        resolved = totals["received"] + totals["lost"] + totals["unresolved"]
        assert totals["sent"] == resolved + totals["handoff_lost"], (name, totals)
        assert totals["lost"] == 0, (name, totals)
        echoes, _ = records_of(kafka_broker.bootstrap, probe_id)
        keys = [(e.partition, e.seq) for e in echoes]
        assert len(keys) == len(set(keys)) == totals["received"] + totals["lost"], (name, totals)
        assert totals["received"] <= on_topic[probe_hash(probe_id)] <= totals["sent"], name
        handed_off += totals["handoff_lost"]
    print(f"fleet: totals {stopped}; handoff_lost {handed_off}")


#: The CTRL+Z test on a fleet: the rate per partition and the stall (D) of one broker.
CTRL_Z_RATE, CTRL_Z_D_S = 50, 4.0


def test_ctrl_z_stays_exact_on_a_fleet_while_a_replica_restarts(
    kafka_broker: EmbeddedBroker, tmp_path: Path
) -> None:
    """The CTRL+Z calibration on a fleet: one broker SIGSTOPped for D = 4 s while a replica that
    probes none of its partitions leaves (SIGTERM) and starts again, so the group rebalances
    through the stall. Each stalled partition that kept its replica carries the stall exactly
    as the open-loop arithmetic says (R·D/2 messages above D/2, from their intended send
    times); no other partition has one above D/2; every replica accounts for every message."""
    from confluent_kafka.admin import AdminClient

    tag = uuid.uuid4().hex[:6]
    topic = f"fleetz.{tag}"
    kafka_broker.create_topic(topic, PARTITIONS, 1)
    rate, d_s = CTRL_Z_RATE, CTRL_Z_D_S
    args = ("--topic", topic, "--fleet-group", tag, "--rate", str(rate), "--cluster",
            f"fleetz-{tag}", "--loss-timeout", "30s")  # fmt: skip

    # a stop waits out the stall for its echoes (the echo topic has a replica on every broker)
    config = tmp_path / "shutdown.yaml"
    config.write_text("probe:\n  shutdown_timeout: 45s\n")

    def start(name: str) -> ProbeProcess:
        argv = ("--config", str(config), *args)
        return ProbeProcess(kafka_broker.bootstrap, f"{tag}-{name}", tmp_path, *argv)

    live = {n: start(n) for n in ("a", "b", "c")}
    stopped: dict[str, dict[str, int]] = {}
    try:
        all_probed_since(list(live.values()), time.time())
        md = AdminClient({"bootstrap.servers": kafka_broker.bootstrap}).list_topics(timeout=10)
        leaders = {p: pm.leader for p, pm in md.topics[topic].partitions.items()}
        stalled_broker = leaders[0]
        stalled = sorted(p for p, b in leaders.items() if b == stalled_broker)
        held = dict(zip(live, shares(list(live.values())), strict=True))
        # the replica that restarts: the one holding the fewest of the stalled partitions
        leaving = min(held, key=lambda n: (len(held[n] & set(stalled)), n))
        time.sleep(3)  # a floor of healthy messages before the stall
        pid = kafka_broker.broker_pid(stalled_broker)
        t_stop = time.time()
        os.kill(pid, signal.SIGSTOP)
        try:
            gone = live.pop(leaving)
            gone.proc.send_signal(signal.SIGTERM)  # it leaves the group, and waits for its echoes
            live[leaving + "2"] = start(leaving + "2")  # the replica, started again
            time.sleep(max(0.0, d_s - (time.time() - t_stop)))
        finally:
            os.kill(pid, signal.SIGCONT)
        t_resume = time.time()
        status = gone.proc.wait(60)
        assert status == 0, (status, gone.stderr())
        stopped[leaving] = gone.summary()
        all_probed_since(list(live.values()), t_resume)
        time.sleep(6)  # the stalled messages come back, and some after them
        stopped |= stop_all(live)
    finally:
        for r in live.values():
            r.kill()

    echoes = {n: records_of(kafka_broker.bootstrap, f"{tag}-{n}", timeout_s=60)[0] for n in stopped}
    for name, totals in stopped.items():
        resolved = totals["received"] + totals["lost"] + totals["unresolved"]
        assert totals["sent"] == resolved + totals["handoff_lost"], (name, totals)
        # every message received or lost has its echo, or its echo is counted dropped
        echoed = len(echoes[name]) + totals["echo_dropped"]
        assert echoed == totals["received"] + totals["lost"], (name, totals)
    # per partition, who sent the messages intended in the stall (and its edges): one replica
    # throughout, every seq of it there, or a handoff (to another replica, or revoked and given
    # back as the group recovered from its stalled coordinator), whose messages in flight end as
    # handoff_lost and whose schedule starts again: not calibrated
    t0_us, t1_us = int((t_stop - 1) * 1e6), int((t_resume + 1) * 1e6)
    during = {
        p: [
            (n, e.seq)
            for n, es in echoes.items()
            for e in es
            if e.partition == p and t0_us <= e.intended_us < t1_us
        ]
        for p in range(PARTITIONS)
    }
    senders = {p: {n for n, _ in during[p]} for p in range(PARTITIONS)}
    # kept: one replica sent every message its schedule intended over the whole window. Seqs
    # without a gap are not enough: a partition revoked before the stall and given back after
    # it has none, and no message intended in the stall (the cold CI run: partition 4, 0 above
    # D/2, judged as kept)
    window_msgs = rate * (t1_us - t0_us) / 1e6
    kept = [
        p
        for p in stalled
        if len(senders[p]) == 1
        and len(during[p]) == max(s for _, s in during[p]) - min(s for _, s in during[p]) + 1
        and len(during[p]) >= window_msgs - 2
    ]
    assert kept, ("every stalled partition changed replicas in the stall", senders, held)
    lat_s = {
        p: np.array(
            [
                e.end_to_end_us
                for es in echoes.values()
                for e in es
                if e.partition == p and not e.lost
            ]
        )
        / 1e6
        for p in range(PARTITIONS)
    }
    healthy = np.concatenate([lat_s[p] for p in range(PARTITIONS) if p not in stalled])
    floor_p99 = float(np.quantile(healthy, 0.99))
    over = {p: int((lat > d_s / 2).sum()) for p, lat in lat_s.items()}
    stall_s = t_resume - t_stop
    why = (over, leaders, senders, f"stall {stall_s:.2f} s, floor p99 {floor_p99:.3f} s")
    print(f"\nfleet CTRL+Z: broker {stalled_broker} stalled {stall_s:.2f} s while {leaving} "
          f"restarted; over D/2 per partition {over}; stalled partitions kept {kept}")  # fmt: skip
    for p in range(PARTITIONS):
        if p in kept:  # R·(S - D/2) from the stall as it lasted, within the check_ctrl_z tolerance
            expect = rate * (stall_s - d_s / 2)
            assert expect - 0.1 * rate <= over[p], (p, why)
            assert over[p] <= expect + rate * (0.5 + floor_p99 + 1 / rate), (p, why)
        elif p not in stalled:
            assert over[p] == 0, (p, why)
