"""The agent's parts one by one, without a broker: planner, echo publisher, consumer, producer."""

from __future__ import annotations

import logging
import threading
from typing import Any

import pytest

from core.config import ConfigError
from core.echo import Echo, Hiccup, decode_record
from probes.clock import ProbeClock
from probes.config import MAX_TOTAL_RATE
from probes.consumer import ProbeConsumer
from probes.payload import encode, probe_hash
from probes.planner import PartitionPlanner, follow, plan
from probes.producer import ProbeProducer
from probes.publisher import EchoPublisher
from probes.schedule import Schedule
from probes.tracker import Tracker
from probes.transport import Layout

T0 = 1_795_000_000_000_000


# -- partition planner -------------------------------------------------------------------------


def test_plan_probes_every_partition_sorted_with_its_leader() -> None:
    planned = plan(Layout({2: 3, 0: 1, 1: 2}, frozenset({1, 2, 3})), rate_per_s=100)
    assert planned.partitions == [0, 1, 2]
    assert planned.leaders == {0: 1, 1: 2, 2: 3}
    assert planned.idle_brokers == []


def test_plan_names_the_brokers_that_lead_nothing() -> None:
    planned = plan(Layout({0: 1, 1: 1, 2: 1}, frozenset({1, 2, 3, 4})), rate_per_s=100)
    assert planned.idle_brokers == [2, 3, 4]
    leaderless = plan(Layout({0: 1, 1: -1}, frozenset({1, 2})), rate_per_s=100)
    assert leaderless.idle_brokers == [2] and leaderless.partitions == [0, 1]


def test_plan_refuses_a_total_rate_over_the_limit() -> None:
    layout = Layout({0: 1, 1: 2, 2: 3}, frozenset({1, 2, 3}))
    assert plan(layout, rate_per_s=6666).partitions == [0, 1, 2]  # 19,998/s: just under
    with pytest.raises(ConfigError) as err:
        plan(layout, rate_per_s=6667)
    assert str(err.value) == "rate: 6667/s × 3 partitions = 20001/s exceeds the limit of 20000/s"


def test_follow_keeps_the_last_leader_while_a_partition_has_none() -> None:
    leaders = {0: 1, 1: 2}
    follow(leaders, {0: 3, 1: -1, 2: 2})
    assert leaders == {0: 3, 1: 2, 2: 2}


class Layouts:
    """A transport that only answers metadata questions."""

    def __init__(self, layout: Layout, seen: list[dict[int, int] | None]) -> None:
        self.layout, self.seen = layout, seen

    def discover(self) -> Layout:
        return self.layout

    def leaders(self) -> dict[int, int] | None:
        return self.seen.pop(0)


def test_planner_warns_once_about_idle_brokers_and_follows_moves_in_place(
    caplog: pytest.LogCaptureFixture,
) -> None:
    transport: Any = Layouts(Layout({0: 1, 1: 1}, frozenset({1, 2, 3})), [None, {0: 2, 1: -1}])
    planner = PartitionPlanner("nines.probe", 100, threading.Lock())
    held = planner.leaders  # the producer holds this very dict
    with caplog.at_level(logging.WARNING, logger="nines.probe"):
        planner.discover(transport)
    assert [r.getMessage() for r in caplog.records] == [
        "brokers [2, 3] lead no partition of nines.probe, so they are not probed; add "
        "partitions (or reassign leaders) so that every broker leads at least one"
    ]
    assert planner.partitions == [0, 1] and held == {0: 1, 1: 1}
    planner.refresh(transport)  # no answer: nothing changes
    assert held == {0: 1, 1: 1}
    planner.refresh(transport)
    assert held == {0: 2, 1: 1} and planner.leaders is held


def test_a_partition_a_refresh_sees_first_is_still_grown() -> None:
    """CreatePartitions, then a leader refresh that sees the new partition before the next
    survey (seen on Apache Kafka under load): the survey must still hand it over to probe."""
    from kafkautil.admin import Survey

    transport: Any = Layouts(Layout({0: 1, 1: 2}, frozenset({1, 2})), [{0: 1, 1: 2, 2: 3}])
    planner = PartitionPlanner("nines.probe", 100, threading.Lock())
    planner.discover(transport)
    planner.refresh(transport)  # partition 2 exists now, led by the broker that joined
    assert planner.partitions == [0, 1] and 2 not in planner.leaders
    survey = Survey("nines.probe", frozenset({1, 2, 3}), {0: 1, 1: 2, 2: 3},
                    {0: [1], 1: [2], 2: [3]})  # fmt: skip
    assert planner.grow(survey) == [2]
    assert planner.partitions == [0, 1, 2] and planner.leaders[2] == 3


def test_planner_takes_in_led_new_partitions_and_says_when_the_topic_goes_and_is_back(
    caplog: pytest.LogCaptureFixture,
) -> None:
    answers = [{0: 1, 1: 2, 2: -1}, {0: 1, 1: 2, 2: 3}, {}, None, {}, {}, {0: 1, 1: 2, 2: 3}]
    transport: Any = Layouts(Layout({0: 1, 1: 2}, frozenset({1, 2, 3})), answers)
    planner = PartitionPlanner("nines.probe", 100, threading.Lock())
    planner.discover(transport)
    assert planner.exists is True
    caplog.clear()  # the line that broker 3 leads nothing
    with caplog.at_level(logging.INFO, logger="nines.probe"):
        planner.refresh(transport)  # partition 2 added, no leader yet: not read back yet
        assert planner.grow_seen() == [] and planner.unprobed_partitions() == [2]
        planner.refresh(transport)
        assert planner.grow_seen() == [2] and planner.unprobed_partitions() == []
        assert planner.partitions == [0, 1, 2] and planner.leaders[2] == 3
        planner.refresh(transport)  # one answer without the topic (a lagging broker may)
        assert planner.exists is True
        planner.refresh(transport)  # no answer at all: says nothing about the topic
        planner.refresh(transport)  # a second answer in a row without it: gone
        assert planner.exists is False and planner.grow_seen() == []
        planner.refresh(transport)  # still gone: not said again
        planner.refresh(transport)
        assert planner.exists is True and planner.grow_seen() == []  # the same partitions
    assert [r.getMessage() for r in caplog.records] == [
        "nines.probe: the cluster has no such topic now (deleted?): its messages are counted "
        "lost until it is back (nines_probe_topic_exists)",
        "nines.probe is back, with 3 partitions: probing it again",
    ]


def test_new_partitions_past_the_rate_limit_are_refused_in_one_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    answers = [{0: 1, 1: 2, 2: 3}, {0: 1, 1: 2, 2: 3}]
    transport: Any = Layouts(Layout({0: 1, 1: 2}, frozenset({1, 2, 3})), answers)
    planner = PartitionPlanner("nines.probe", MAX_TOTAL_RATE / 2, threading.Lock())
    planner.discover(transport)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="nines.probe"):
        for _ in answers:
            planner.refresh(transport)
            assert planner.grow_seen() == [] and planner.unprobed_partitions() == [2]
    assert len(caplog.records) == 1
    assert caplog.records[0].getMessage().startswith("not probing new partitions [2]")


# -- echo publisher ----------------------------------------------------------------------------


class Sink:
    """An echo producer look-alike with a buffer of ``capacity`` records."""

    def __init__(self, capacity: int = 10) -> None:
        self.capacity = capacity
        self.queued: list[tuple[str, str, bytes, Any]] = []

    def produce(self, topic: str, *, key: str, value: bytes, on_delivery: Any) -> None:
        if len(self.queued) >= self.capacity:
            raise BufferError("Local: Queue full")
        self.queued.append((topic, key, value, on_delivery))

    def deliver(self, err: Any = None) -> None:
        for *_, done in self.queued:
            done(err, None)
        self.queued.clear()

    def poll(self, timeout: float) -> int:
        return 0

    def flush(self, timeout: float) -> int:
        self.deliver()
        return 0

    def __len__(self) -> int:
        return len(self.queued)


def echo(seq: int) -> Echo:
    return Echo("p1", "c", "nines.probe", 0, 1, seq, 512, T0, T0 + 5, T0 + 90, T0 + 100)


def test_publisher_encodes_each_record_with_the_echo_schema_keyed_by_probe() -> None:
    sink = Sink()
    pub = EchoPublisher("nines.echoes", "p1")
    pub.open(sink)
    hiccup = Hiccup("p1", "c", T0, T0 + 1_000_000, 300, 900, 1000)
    pub.publish(echo(7))
    pub.publish(hiccup)
    assert [(t, k) for t, k, _, _ in sink.queued] == [("nines.echoes", "p1")] * 2
    assert [decode_record(v) for _, _, v, _ in sink.queued] == [echo(7), hiccup]
    assert pub.buffered == 2 and pub.published == 0
    sink.deliver()
    assert pub.published == 2 and pub.buffered == 0 and pub.dropped == 0


def test_publisher_counts_every_drop_and_warns_at_most_every_10s(
    caplog: pytest.LogCaptureFixture,
) -> None:
    sink = Sink(capacity=1)
    pub = EchoPublisher("nines.echoes", "p1")
    pub.open(sink)
    with caplog.at_level(logging.WARNING, logger="nines.probe"):
        for seq in range(4):
            pub.publish(echo(seq))  # one fits, three do not
        sink.deliver(err=type("Err", (), {"str": lambda self: "Broker: timed out"})())
    assert pub.dropped == 4 and pub.published == 0
    assert [r.getMessage() for r in caplog.records] == [
        "dropping echo records (echo buffer full): 1 dropped so far; probing continues"
    ]


def test_publisher_keeps_its_buffered_count_after_release() -> None:
    sink = Sink()
    pub = EchoPublisher("nines.echoes", "p1")
    pub.open(sink)
    pub.publish(echo(1))
    pub.release()
    assert pub.sink is None and pub.buffered == 1


# -- consumer and producer ---------------------------------------------------------------------


def test_consumer_tracks_only_its_own_probe_messages() -> None:
    tracker = Tracker("p1", "c", "nines.probe", 128, 30_000_000)
    out: list[Echo] = []
    mine, other = probe_hash("p1"), probe_hash("p2")
    consumer = ProbeConsumer(None, tracker, threading.Lock(), ProbeClock(), mine, out.append)  # type: ignore[arg-type]
    tracker.sent(0, 0, T0, T0 + 10, 1)
    tracker.acked(0, 0, T0 + 20)
    tracker.sent(0, 1, T0 + 10, T0 + 30, 1)
    consumer.arrived(
        [None, b"not a probe", encode(other, 0, 1, T0, 128), encode(mine, 0, 0, T0, 128)],
        T0 + 500,
    )
    assert [(e.seq, e.received_us) for e in out] == [(0, T0 + 500)]
    consumer.arrived([encode(mine, 0, 1, T0 + 10, 128)], T0 + 600)  # held: no ack yet
    assert len(out) == 1 and tracker.stats[0].received == 2
    assert tracker.stats[0].duplicates == 0  # p2's seq 1 was never taken for ours


def test_producer_stamps_acks_and_failures_into_the_tracker() -> None:
    tracker = Tracker("p1", "c", "nines.probe", 128, 30_000_000)
    out: list[Echo] = []
    schedule = Schedule([0], 100, T0)
    producer = ProbeProducer(
        None,  # type: ignore[arg-type]
        schedule,
        tracker,
        threading.Lock(),
        ProbeClock(),
        {0: 1},
        probe_hash("p1"),
        128,
        out.append,
    )
    tracker.sent(0, 0, T0, T0 + 10, 1)
    tracker.received(0, 0, T0 + 50)
    producer.reported(0, 0, None)
    assert len(out) == 1 and out[0].acked_us is not None and out[0].acked_us > T0
    tracker.sent(0, 1, T0 + 10_000, T0 + 10_010, 1)
    producer.reported(0, 1, "_MSG_TIMED_OUT")
    assert tracker.stats[0].send_errors == {"_MSG_TIMED_OUT": 1}
    assert len(out) == 1 and (0, 1) in tracker.in_flight  # lost at its timeout, unless it arrives


class _RefusingTransport:
    """Accepts sends to partition 0; the client refuses every send to partition 1 on the spot,
    as librdkafka does after an idempotent producer's fatal error (a real KafkaException)."""

    def __init__(self) -> None:
        self.sent: list[tuple[int, int]] = []

    def send(self, partition: int, seq: int, payload: bytes, report: object) -> None:
        from confluent_kafka import KafkaError, KafkaException

        if partition == 1:
            raise KafkaException(KafkaError(KafkaError._FATAL))
        self.sent.append((partition, seq))


def test_a_send_refused_on_the_spot_is_a_send_error_and_the_sender_goes_on() -> None:
    tracker = Tracker("p1", "c", "nines.probe", 128, 30_000_000)
    out: list[Echo] = []
    clock = ProbeClock()
    schedule = Schedule([0, 1], 100, clock.now_us() - 200_000)  # 20 messages each already due
    transport = _RefusingTransport()
    producer = ProbeProducer(
        transport,  # type: ignore[arg-type]
        schedule,
        tracker,
        threading.Lock(),
        clock,
        {0: 1, 1: 2},
        probe_hash("p1"),
        128,
        out.append,
        duration_s=0.2,
    )
    producer.send_until(threading.Event())  # returns at the schedule's end, not on the error
    assert transport.sent == [(0, seq) for seq in range(20)]
    assert tracker.stats[1].sent == 20 and tracker.stats[1].send_errors == {"_FATAL": 20}
    assert tracker.stats[0].send_errors == {}
