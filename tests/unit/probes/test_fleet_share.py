"""A probe fleet's parts without a broker: the schedule gives a partition up and takes it back,
a handoff ends each message in flight exactly once, the sender stops at the revocation, and the
replica's /metrics say what it probes (``probes.fleet``)."""

from __future__ import annotations

import json
import re
import threading
import time
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from core.echo import Echo
from probes.clock import ProbeClock
from probes.fleet import FleetShare
from probes.metrics import ProbeCollector
from probes.payload import probe_hash
from probes.planner import PartitionPlanner
from probes.producer import ProbeProducer
from probes.schedule import Schedule
from probes.summary import FIELDS, read_summary
from probes.tracker import Tracker
from probes.transport import Layout

T0 = 1_795_000_000_000_000
METRICS_MD = Path(__file__).resolve().parents[3] / "docs" / "metrics.md"


def test_a_removed_partition_leaves_the_schedule_and_comes_back_at_its_next_seq() -> None:
    s = Schedule([0, 1], 100, T0)
    s.advance(s.next_due()[1])  # partition 0's seq 0
    s.remove(0)
    assert s.next_seq == {1: 0} and s.next_due()[1] == 1
    s.remove(0)  # twice: nothing
    s.add(0, T0 + 5_000_000)
    assert s.next_seq[0] == 1 and (T0 + 5_000_000, 0, 1) in s._due
    assert s.intended_us(0, 1) == T0 + 5_000_000 and s.intended_us(0, 2) == T0 + 5_010_000


def test_a_partition_given_back_before_the_sender_noticed_restarts_its_times() -> None:
    s = Schedule([0], 100, T0)
    s.add(0, T0 + 60_000_000)  # still scheduled from T0: its backlog's times are void now
    assert s._due == [(T0 + 60_000_000, 0, 0)] and s.intended_us(0, 1) == T0 + 60_010_000


@given(st.lists(st.sampled_from(["sent", "ack", "recv", "handoff", "expire"]), max_size=60))
def test_every_message_ends_exactly_once_through_handoffs(ops: list[str]) -> None:
    """sent = received + lost + handoff_lost + in flight, whatever order things happen in."""
    t = Tracker("p1", "c", "t", 128, 1_000)
    seq, now, echoes = 0, T0, 0
    for op in ops:
        now += 300
        inflight = sorted(t.in_flight)
        if op == "sent":
            t.sent(0, seq, now, now, 1)
            seq += 1
        elif op == "ack" and inflight:
            echoes += t.acked(*inflight[0], now) is not None
        elif op == "recv" and inflight:
            echoes += t.received(*inflight[-1], now) is not None
        elif op == "handoff":
            echoes += len(t.hand_off({0}))
        elif op == "expire":
            echoes += len(t.expire(now))
        st_ = t.stats.get(0)
        if st_ is not None:
            assert st_.sent == st_.received + st_.lost + st_.handoff_lost + t.unreceived
    st_ = t.stats.get(0)
    if st_ is not None:
        # every received or lost message has its echo (or holds it for its report)
        assert echoes == st_.received + st_.lost - t.held


def test_a_handoff_echoes_what_came_back_and_counts_the_rest_once() -> None:
    t = Tracker("p1", "c", "t", 128, 30_000_000)
    for seq in range(3):
        t.sent(0, seq, T0 + seq, T0 + seq, 1)
    t.sent(1, 0, T0, T0, 2)
    assert t.received(0, 0, T0 + 100) is None  # back, its ack not yet
    echoes = t.hand_off({0})
    assert [(e.seq, e.lost, e.received_us) for e in echoes] == [(0, False, T0 + 100)]
    assert t.stats[0].handoff_lost == 2 and t.stats[0].lost == 0 and t.held == 0
    assert list(t.in_flight) == [(1, 0)]
    assert t.acked(0, 1, T0 + 200) is None and t.hand_off({0}) == []  # nothing twice
    assert t.expire(T0 + 10**9) and t.stats[0].lost == 0  # only partition 1's expires


class _Recorder:
    """Accepts every send, as a client with room in its queue does."""

    def __init__(self) -> None:
        self.sent: list[tuple[int, int]] = []

    def send(self, partition: int, seq: int, payload: bytes, report: object) -> None:
        self.sent.append((partition, seq))


def _share(rate: float = 100) -> tuple[FleetShare, Tracker, threading.Lock, list[Echo]]:
    lock, out = threading.Lock(), []
    tracker = Tracker("p1", "c", "t", 128, 30_000_000)
    planner = PartitionPlanner("t", rate, lock, fleet=True)
    share = FleetShare(lock, tracker, planner, ProbeClock(), out.append, 0)
    return share, tracker, lock, out


def test_the_sender_sends_only_to_the_partitions_the_group_assigned() -> None:
    share, tracker, lock, out = _share()
    clock = ProbeClock()
    schedule = Schedule([], 100, clock.now_us())
    transport = _Recorder()
    producer = ProbeProducer(
        transport,  # type: ignore[arg-type]
        schedule,
        tracker,
        lock,
        clock,
        {0: 1, 1: 2, 2: 3},
        probe_hash("p1"),
        128,
        out.append,
        duration_s=0.6,
        owned=share.owned,
    )
    share.join = producer.join
    assert share.assigned([0, 1]) == [0, 1]
    stopping = threading.Event()
    sender = threading.Thread(target=producer.send_until, args=(stopping,))
    sender.start()
    while not any(p == 1 for p, _ in transport.sent):
        time.sleep(0.001)
    share.revoked([1])
    with lock:  # the revocation is complete: from here on, nothing more to partition 1
        after = sum(1 for p, _ in transport.sent if p == 1)
    sender.join()
    assert sum(1 for p, _ in transport.sent if p == 1) == after
    assert {p for p, _ in transport.sent} == {0, 1} and 1 not in schedule.next_seq
    s1 = tracker.stats[1]
    assert s1.sent == after and s1.handoff_lost == after and (1, 0) not in tracker.in_flight
    assert share.planner.partitions == [0]


def test_a_replica_probes_no_more_than_its_rate_limit_allows(caplog: Any) -> None:
    share, *_ = _share(rate=10_000)  # 2 partitions reach 20,000/s
    share.join = lambda partitions, start_us: None
    assert share.assigned([0, 1, 2]) == [0, 1]
    assert "not probing partitions [2]" in caplog.text and share.owned == {0, 1}


def test_at_shutdown_a_release_is_no_handoff() -> None:
    share, tracker, *_ = _share()
    share.join = lambda partitions, start_us: None
    share.assigned([0])
    tracker.sent(0, 0, T0, T0, 1)
    share.closing = True
    share.revoked([0])
    assert tracker.stats[0].handoff_lost == 0 and (0, 0) in tracker.in_flight  # unresolved


def test_a_fleet_planner_follows_every_leader_and_reports_the_topics_coverage() -> None:
    class Layouts:
        def discover(self) -> Layout:
            return Layout({0: 1, 1: 2, 2: 2}, frozenset({1, 2, 3}))

    planner = PartitionPlanner("t", 100, threading.Lock(), fleet=True)
    planned = planner.discover(Layouts())  # type: ignore[arg-type]
    assert planned.partitions == [] and planner.leaders == {0: 1, 1: 2, 2: 2}
    assert planner.unprobed() == {3} and planner.unprobed_partitions() == []
    assert planner.grow_seen() == []


def _families(fleet: bool) -> dict[str, Any]:
    part = {
        "sent": 5, "acked": 5, "received": 4, "lost": 0, "late_after_loss": 0, "duplicates": 0,
        "out_of_order": 0, "send_errors": {}, "handoff_lost": 1, "last_sent_us": T0,
    }  # fmt: skip
    snap: dict[str, Any] = {
        "cluster": "c", "topic": "t", "partitions": {0: part}, "leaders": {0: 1},
        "in_flight": 0, "echo_dropped": 0, "arrivals_dropped": 0, "echo_buffered": 0,
        "hiccup_max_us": 0, "brokers": 3, "brokers_unprobed": 0, "admin_errors": {},
    }  # fmt: skip
    if fleet:
        snap["fleet"] = {0: 1, 1: 0}
    return {f.name: f for f in ProbeCollector(lambda: snap).collect()}


def test_a_replica_exports_its_share_and_a_single_probe_does_not() -> None:
    fams = _families(fleet=True)
    probed = fams["nines_probe_partition_probed"].samples
    assert [(s.labels["partition"], s.value) for s in probed] == [("0", 1), ("1", 0)]
    last = fams["nines_probe_partition_last_sent_timestamp_seconds"].samples
    assert [s.value for s in last] == [T0 / 1e6]
    assert [s.value for s in fams["nines_probe_handoff_lost"].samples] == [1]
    assert "nines_probe_partition_probed" not in _families(fleet=False)
    documented = set(re.findall(r"^\| `(nines_probe_[a-z0-9_]+)`", METRICS_MD.read_text(), re.M))
    fleet_names = {
        "nines_probe_partition_probed",
        "nines_probe_partition_last_sent_timestamp_seconds",
        "nines_probe_handoff_lost_total",
    }
    assert fleet_names <= documented


def test_a_summary_written_before_handoff_lost_existed_reads_it_as_0(tmp_path: Path) -> None:
    old = {"format": 1, **{k: 1 for k in FIELDS if k != "handoff_lost"}}
    (tmp_path / "s.json").write_text(json.dumps(old))
    assert read_summary(tmp_path / "s.json")["handoff_lost"] == 0


def test_deploy_md_sizes_the_fleet_by_its_own_rule() -> None:
    """docs/deploy.md's brokers → replicas → cores table follows the rule and the cost it
    states (100 msgs/s per broker; 0.178 and 0.312 of a core per 1,000 msgs/s)."""
    deploy = (Path(__file__).resolve().parents[3] / "docs" / "deploy.md").read_text()
    section = deploy.split("## A probe fleet", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| ([\d,]+) \| ([\d,]+) \| (\d+) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \|$",
                      section, re.M)  # fmt: skip
    assert len(rows) >= 6
    for brokers, msgs, replicas, cores, per, cores_quiet in rows:
        b = int(brokers.replace(",", ""))
        assert int(msgs.replace(",", "")) == 100 * b
        assert int(replicas) == max(2, -(-b // 50))
        assert float(cores) == round(0.178 * b / 10, 2)
        assert float(per) == round(0.178 * b / 10 / int(replicas), 2)
        assert float(cores_quiet) == round(0.312 * b / 10, 2)
