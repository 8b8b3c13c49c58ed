"""Topic management without a broker: where partitions go, when admin calls are made, and the
whole agent growing its topic through an in-memory admin (no test broker can add partitions;
see tests/integration/probes/test_probe_manage_topic.py for what they can show).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from concurrent.futures import Future
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from test_probe_loopback import Loopback, Sink

from core.config import ConfigError, build
from core.echo import Echo
from core.echo_v2 import decode_message
from kafkautil.admin import Survey, refusal, survey
from probes import ProbeAgent, ProbeConfig
from probes.manager import (
    ANSWER_RETRY_S,
    GROWN_SETTLE_S,
    MAX_BACKOFF_S,
    AdminErrors,
    TopicManager,
    ensure_topic,
)
from probes.metrics import ProbeCollector
from probes.planner import (
    PartitionPlanner,
    initial_partitions,
    initial_replication,
    joined,
    placement,
    preferred_elections,
)
from probes.transport import Layout

T = "nines.probe"


def surveyed(
    replicas: dict[int, list[int]], brokers: set[int], leaders: dict[int, int] | None = None
) -> Survey:
    """A survey whose leaders are the preferred ones unless given."""
    lead = leaders if leaders is not None else {p: r[0] for p, r in replicas.items()}
    return Survey(T, frozenset(brokers), lead, replicas)


def done(error: KafkaError | None = None) -> Future[Any]:
    f: Future[Any] = Future()
    if error is None:
        f.set_result(None)
    else:
        f.set_exception(KafkaException(error))
    return f


DENIED = KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED)


# -- the pure decisions ------------------------------------------------------------------------


def test_created_topic_size_and_replication() -> None:
    assert initial_partitions(3, 2) == 6 and initial_partitions(0, 2) == 2
    assert initial_replication(5, None) == 3 and initial_replication(2, None) == 2
    assert initial_replication(5, 4) == 4 and initial_replication(1, 3) == 1


def test_a_joined_broker_gets_one_partition_led_by_it_and_nothing_existing_moves() -> None:
    s = surveyed({0: [1, 2], 1: [2, 3], 2: [3, 1]}, {1, 2, 3, 4, 5})
    assert s.unprobed == {4, 5} and joined(s) == [4, 5]
    add = placement(s, None)
    # the topic's own replication factor (2); followers: the least loaded brokers first
    assert add == [[4, 5], [5, 4]]
    assert placement(s, 3) == [[4, 5, 1], [5, 4, 2]]
    assert placement(s, 9) == [[4, 5, 1, 2, 3], [5, 4, 1, 2, 3]]  # never more than the brokers


def test_a_restarted_preferred_leader_gets_no_new_partition() -> None:
    # broker 3 is p1's preferred leader but leads nothing right now (it restarted): the
    # cluster's leader rebalance gives p1 back; a new partition per restart would be unbounded.
    s = surveyed({0: [1, 2], 1: [3, 1]}, {1, 2, 3}, leaders={0: 1, 1: 1})
    assert s.unprobed == {2, 3}
    assert joined(s) == [2] and [r[0] for r in placement(s, None)] == [2]
    assert preferred_elections(s) == [1]
    covered = surveyed({0: [1, 2], 1: [2, 1]}, {1, 2})
    assert placement(covered, None) == [] and preferred_elections(covered) == []


# -- the manager: one call at a time, refusals counted, backoff, no election by default -------


class FakeAdmin:
    """Answers surveys from ``state``; each call returns the next queued future (or a done one)."""

    def __init__(self, state: Survey | None) -> None:
        self.state = state
        self.calls: list[tuple[Any, ...]] = []
        self.surveys = 0
        self.answers: list[Future[Any] | Exception] = []
        self.polls = 0

    def survey(self, topic: str, *, known: bool = False) -> Survey | None:
        self.surveys += 1
        return self.state

    def _answer(self, *call: Any) -> Future[Any]:
        self.calls.append(call)
        answer = self.answers.pop(0) if self.answers else done()
        if isinstance(answer, Exception):
            raise answer
        return answer

    def create_topic(self, topic: str, partitions: int, replication_factor: int) -> Future[Any]:
        f = self._answer("create_topic", topic, partitions, replication_factor)
        if f.exception() is None and self.state is not None:
            brokers = sorted(self.state.brokers)
            n = len(brokers)
            reps = {
                p: [brokers[(p + i) % n] for i in range(replication_factor)]
                for p in range(partitions)
            }
            self.state = Survey(topic, self.state.brokers, {p: r[0] for p, r in reps.items()}, reps)
        return f

    def create_partitions(
        self, topic: str, existing: int, placement: Sequence[Sequence[int]]
    ) -> Future[Any]:
        f = self._answer("create_partitions", topic, existing, [list(r) for r in placement])
        if f.done() and f.exception() is None and self.state is not None:
            reps = dict(self.state.replicas)
            for i, r in enumerate(placement):
                reps[existing + i] = list(r)
            self.state = Survey(topic, self.state.brokers, {p: r[0] for p, r in reps.items()}, reps)
        return f

    def elect_preferred(self, topic: str, partitions: Sequence[int]) -> Future[Any]:
        return self._answer("elect_leaders", topic, list(partitions))

    def poll(self) -> None:
        self.polls += 1


def manager(
    admin: FakeAdmin, *, manage: bool = True, rebalance: bool = False, rate: float = 10.0
) -> tuple[TopicManager, list[list[int]]]:
    planner = PartitionPlanner(T, rate, threading.Lock())
    planner.discover(Loopback(Layout({0: 1}, frozenset({1, 2})), set()))
    started: list[list[int]] = []
    m = TopicManager(
        admin,
        planner,
        started.append,
        manage=manage,
        rebalance=rebalance,
        replication_factor=None,
        interval_s=10.0,
        errors=AdminErrors(),
    )
    return m, started


def test_without_manage_topic_it_only_surveys() -> None:
    admin = FakeAdmin(surveyed({0: [1, 2]}, {1, 2, 3}))
    m, started = manager(admin, manage=False)
    m.tick(0.0)
    assert admin.calls == [] and started == []
    assert m.planner.brokers == {1, 2, 3} and m.planner.unprobed() == {2, 3}


def test_grows_once_then_probes_the_new_partition() -> None:
    admin = FakeAdmin(surveyed({0: [1, 2]}, {1, 2}))
    pending: Future[Any] = Future()
    admin.answers = [pending]
    m, started = manager(admin)
    m.tick(0.0)
    assert admin.calls == [("create_partitions", T, 1, [[2, 1]])]
    for now in (0.1, 0.2, 50.0):  # in flight: no second call, no survey, however long
        m.tick(now)
    assert len(admin.calls) == 1 and admin.surveys == 1
    pending.set_result(None)
    admin.create_partitions(T, 1, [[2, 1]])  # what the cluster did (the fake applies it here)
    admin.calls.pop()
    m.tick(50.1)  # settled: surveys at once and probes what appeared
    assert started == [[1]] and m.planner.partitions == [0, 1]
    assert m.planner.leaders == {0: 1, 1: 2} and m.planner.unprobed() == frozenset()
    m.tick(50.2)
    assert len(admin.calls) == 1  # covered: nothing more to do, and no election ever


def test_topics_a_silent_cluster_kept_are_created_soon_after_it_answers() -> None:
    """A cluster silent at start is asked again every ANSWER_RETRY_S, not every interval: the
    topic is created at the first survey it answers (it was up to a whole interval later)."""
    brokers = surveyed({}, {1, 2, 3})
    admin = FakeAdmin(None)
    m, _ = manager(admin)
    m.create_when_answered(admin, "nines.wanted", 1)  # type: ignore[arg-type]
    m.tick(0.0)
    assert admin.surveys == 1 and admin.calls == []
    m.tick(ANSWER_RETRY_S - 0.1)
    assert admin.surveys == 1  # no busy loop on a silent cluster
    admin.state = brokers  # it answers
    m.tick(ANSWER_RETRY_S)
    assert admin.calls[0][:2] == ("create_topic", "nines.wanted")
    assert m.interval_s > ANSWER_RETRY_S


def test_a_silent_cluster_with_nothing_to_create_is_surveyed_every_interval() -> None:
    admin = FakeAdmin(None)
    m, _ = manager(admin)
    for now in (0.0, ANSWER_RETRY_S, 9.9):
        m.tick(now)
    assert admin.surveys == 1
    m.tick(10.0)
    assert admin.surveys == 2


def test_a_refusal_is_counted_and_backs_off_and_never_raises() -> None:
    admin = FakeAdmin(surveyed({0: [1, 2]}, {1, 2}))
    admin.answers = [done(DENIED), done(DENIED), KafkaException(DENIED), done(DENIED)]
    m, _ = manager(admin)
    m.tick(0.0)  # call 1, refused when settled
    m.tick(0.1)
    assert m.failures == 1 and m.backoff_s() == 20.0
    m.tick(20.0)  # still backing off
    assert len(admin.calls) == 1
    m.tick(20.2)  # call 2
    m.tick(20.3)
    assert len(admin.calls) == 2 and m.failures == 2 and m.backoff_s() == 40.0
    m.tick(60.3)  # call 3 raises at once
    assert m.failures == 3 and m.pending is None
    assert m.errors.counts == {("create_partitions", "TOPIC_AUTHORIZATION_FAILED"): 3}
    m.failures = 40
    assert m.backoff_s() == MAX_BACKOFF_S


def test_elections_only_under_rebalance_and_never_a_reassignment() -> None:
    s = surveyed({0: [1, 2], 1: [2, 1]}, {1, 2}, leaders={0: 1, 1: 1})
    admin = FakeAdmin(s)
    m, _ = manager(admin)
    m.tick(0.0)
    assert admin.calls == []  # broker 2 is p1's preferred leader: the cluster will give it back
    admin = FakeAdmin(s)
    m, _ = manager(admin, rebalance=True)
    m.tick(0.0)
    assert admin.calls == [("elect_leaders", T, [1])]


def test_no_partition_added_past_the_probe_rate_limit() -> None:
    admin = FakeAdmin(surveyed({0: [1]}, {1, 2}))
    m, _ = manager(admin, rate=10_000.0)  # 2 partitions would be 20,000/s: at the limit
    m.tick(0.0)
    assert len(admin.calls) == 1
    admin = FakeAdmin(surveyed({0: [1], 1: [1]}, {1, 2}))
    m, _ = manager(admin, rate=10_000.0)
    m.tick(0.0)
    assert admin.calls == []


def test_ensure_topic_creates_a_missing_topic_or_says_why_not() -> None:
    admin = FakeAdmin(Survey(T, frozenset({1, 2, 3, 4}), {}, {}))
    assert ensure_topic(admin, T, 2, None, AdminErrors()) is None
    assert admin.calls == [("create_topic", T, 8, 3)]
    assert ensure_topic(admin, T, 2, None, AdminErrors()) is None and len(admin.calls) == 1
    errors = AdminErrors()
    refused = FakeAdmin(Survey(T, frozenset({1}), {}, {}))
    refused.answers = [done(DENIED)]
    assert ensure_topic(refused, T, 1, 1, errors) == (
        f"TOPIC_AUTHORIZATION_FAILED: the principal lacks CREATE on topic {T!r}"
    )
    assert errors.counts == {("create_topic", "TOPIC_AUTHORIZATION_FAILED"): 1}
    assert ensure_topic(FakeAdmin(None), T, 1, 1, errors) == "no answer"


def test_survey_and_refusal_read_confluent_kafka_answers() -> None:
    from types import SimpleNamespace as NS

    part = NS(leader=2, replicas=[2, 1])
    md = NS(topics={T: NS(error=None, partitions={0: part})}, brokers={1: 0, 2: 0, 3: 0})
    asked: list[str | None] = []

    def list_topics(topic: str | None = None, timeout: float = -1) -> Any:
        asked.append(topic)
        return md

    client = NS(list_topics=list_topics)
    s = survey(client, T, 1.0)
    assert s == Survey(T, frozenset({1, 2, 3}), {0: 2}, {0: [2, 1]}) and s.unprobed == {1, 3}
    assert survey(client, "other", 1.0).exists is False  # type: ignore[union-attr]
    assert survey(client, T, 1.0, known=True) == s
    assert asked == [None, None, T]  # only a topic known to exist is asked for by name

    def silent(timeout: float) -> Any:
        raise KafkaException(KafkaError(KafkaError._TRANSPORT))

    assert survey(NS(list_topics=silent), T, 1.0) is None
    assert refusal(KafkaException(DENIED)) == "TOPIC_AUTHORIZATION_FAILED"
    assert refusal(TimeoutError("x")) == "TimeoutError"


# -- the agent: an empty cluster to full coverage, then a broker joins -------------------------


class Growing(Loopback):
    """A loopback whose layout is the fake admin's state, and which can receive new partitions."""

    def __init__(self, admin: FakeAdmin) -> None:
        super().__init__(Layout({}, frozenset()), set())
        self.admin = admin
        self.added: list[list[int]] = []

    def discover(self) -> Layout:
        s = self.admin.state
        assert s is not None
        return Layout(dict(s.leaders), s.brokers)

    def leaders(self) -> dict[int, int] | None:
        return self.discover().leaders

    def add_receiver(self, partitions: list[int]) -> None:
        self.added.append(partitions)


def test_agent_brings_an_empty_cluster_to_full_coverage_without_a_reassignment() -> None:
    admin = FakeAdmin(Survey(T, frozenset({1, 2}), {}, {}))
    echo_admin = FakeAdmin(Survey("nines.echoes", frozenset({7}), {}, {}))
    transport, sink = Growing(admin), Sink()
    config = ProbeConfig(
        bootstrap="loopback:0",
        rate=200,
        metrics_port=0,
        probe_id="grow",
        cluster="c",
        manage_topic=True,
        manage_interval=0.05,
        hiccup_interval=0.1,
    )
    agent = ProbeAgent(config, transport=transport, echo_sink=sink, admin=(admin, echo_admin))
    agent.start()
    try:
        assert admin.calls == [("create_topic", T, 2, 2)]
        assert echo_admin.calls == [("create_topic", "nines.echoes", 1, 1)]
        assert agent.partitions == [0, 1]
        assert agent.stats()["brokers_unprobed"] == 0
        # broker 3 joins
        assert admin.state is not None
        admin.state = Survey(T, frozenset({1, 2, 3}), admin.state.leaders, admin.state.replicas)
        deadline = threading.Event()
        for _ in range(100):
            if (
                agent.partitions == [0, 1, 2]
                and agent.stats()["partitions"].get(2, {}).get("received", 0) >= 10
            ):
                break
            deadline.wait(0.05)
        stats = agent.stats()
        families = {f.name: f for f in ProbeCollector(agent.stats).collect()}
    finally:
        agent.stop()
    assert admin.calls[1:] == [("create_partitions", T, 2, [[3, 1]])]  # and nothing else
    assert transport.added == [[2]] and agent.partitions == [0, 1, 2]
    assert stats["leaders"] == {0: 1, 1: 2, 2: 3}
    assert (stats["brokers"], stats["brokers_unprobed"], stats["admin_errors"]) == (3, 0, {})
    assert families["nines_probe_brokers"].samples[0].value == 3
    assert families["nines_probe_brokers_unprobed"].samples[0].value == 0
    echoes = [r for v in sink.delivered for r in decode_message(v) if isinstance(r, Echo)]
    led = {e.leader for e in echoes if e.partition == 2}
    assert led == {3} and len([e for e in echoes if e.partition == 2]) >= 10
    assert sorted(e.seq for e in echoes if e.partition == 2) == list(
        range(stats["partitions"][2]["sent"])
    )


def test_refused_probe_topic_creation_exits_with_one_line() -> None:
    admin = FakeAdmin(Survey(T, frozenset({1}), {}, {}))
    admin.answers = [done(DENIED)]
    config = ProbeConfig(bootstrap="k:9092", metrics_port=0, manage_topic=True)
    agent = ProbeAgent(config, transport=Growing(admin), echo_sink=Sink(), admin=(admin, admin))
    with pytest.raises(
        ConfigError,
        match=r"^topic: 'nines.probe' is missing on k:9092: TOPIC_AUTHORIZATION_FAILED: the "
        r"principal lacks CREATE on topic 'nines.probe'$",
    ):
        agent.start()


def test_config_rebalance_needs_manage_topic_and_values_are_checked() -> None:
    with pytest.raises(ConfigError, match=r"^probe\.rebalance: needs manage_topic"):
        build(ProbeConfig, {"bootstrap": "k", "rebalance": True}, prefix="probe")
    with pytest.raises(ConfigError, match=r"probe\.partitions_per_broker"):
        build(ProbeConfig, {"bootstrap": "k", "partitions_per_broker": 0}, prefix="probe")
    with pytest.raises(ConfigError, match=r"probe\.manage_interval"):
        build(ProbeConfig, {"bootstrap": "k", "manage_interval": "0s"}, prefix="probe")
    cfg = build(
        ProbeConfig,
        {"bootstrap": "k", "manage_topic": True, "rebalance": True, "manage_interval": "2m"},
    )
    assert cfg.manage_interval == 120.0 and cfg.replication_factor is None
    assert not ProbeConfig(bootstrap="k").manage_topic


class Stubborn(Growing):
    """A growing loopback whose first attempt to read new partitions back fails."""

    def __init__(self, admin: FakeAdmin) -> None:
        super().__init__(admin)
        self.refusals = 1

    def add_receiver(self, partitions: list[int]) -> None:
        if self.refusals:
            self.refusals -= 1
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT))
        super().add_receiver(partitions)


def test_new_partitions_that_cannot_be_read_back_yet_are_retried() -> None:
    admin = FakeAdmin(surveyed({0: [1], 1: [2]}, {1, 2}))
    transport = Stubborn(admin)
    config = ProbeConfig(
        bootstrap="loopback:0", rate=100, metrics_port=0, manage_topic=True, manage_interval=0.05
    )
    agent = ProbeAgent(config, transport=transport, echo_sink=Sink(), admin=(admin, admin)).start()
    try:
        admin.state = surveyed({0: [1], 1: [2], 2: [1]}, {1, 2})  # someone added partition 2
        for _ in range(100):
            if agent.stats()["partitions"].get(2, {}).get("received", 0) >= 5:
                break
            threading.Event().wait(0.05)
        stats = agent.stats()
    finally:
        agent.stop()
    assert transport.refusals == 0 and transport.added == [[2]]
    assert agent.partitions == [0, 1, 2] and stats["partitions"][2]["received"] >= 5


def test_every_tick_serves_the_admin_clients_log_queue() -> None:
    """A real AdminClient on a closed port, with a logger: librdkafka queues its lines for
    ``poll()``; the manager's ticks deliver them (unserved, the queue grows without bound)."""
    import socket
    import time

    from kafkautil.admin import TopicAdmin

    with socket.socket() as s:  # a port that refuses connections
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    lines: list[str] = []

    class Collect:
        def log(self, _level: int, fmt: str, *args: object) -> None:
            lines.append(fmt % args if args else fmt)

    admin = TopicAdmin(
        {"bootstrap.servers": f"127.0.0.1:{port}", "logger": Collect(),
         "reconnect.backoff.max.ms": 100},
        timeout_s=1.0,
        survey_timeout_s=0.05,
    )  # fmt: skip
    time.sleep(1.0)
    assert lines == [], "lines reach the logger only through poll()"
    m, _ = manager(FakeAdmin(None))
    m.admin = admin
    deadline = time.monotonic() + 10
    while not lines and time.monotonic() < deadline:
        m.tick(time.monotonic())
        time.sleep(0.1)
    assert any("refused" in line.lower() or "failed" in line.lower() for line in lines), lines
    fake = FakeAdmin(None)
    m, _ = manager(fake)
    for t in range(3):
        m.tick(float(t))
    assert fake.polls == 3


def test_stale_metadata_after_adding_partitions_is_waited_out_not_asked_again() -> None:
    """A survey right after CreatePartitions succeeded may come from a broker that does not
    know the new partition yet: asking again was refused ("Topic already has 3 partition(s)",
    counted as an error, a loaded CI-like run). The manager looks again soon instead, and only
    GROWN_SETTLE_S later takes a smaller topic as needing partitions again."""
    stale = surveyed({0: [1, 2]}, {1, 2})
    admin = FakeAdmin(stale)
    m, started = manager(admin)
    m.tick(0.0)  # adds partition 1 for broker 2; the fake answers at once
    assert admin.calls == [("create_partitions", T, 1, [[2, 1]])]
    grown = admin.state
    admin.state = stale  # the next broker asked does not know it yet
    m.tick(0.1)  # settled: surveys at once, sees 1 partition of 2
    m.tick(0.2)
    assert len(admin.calls) == 1 and m.errors.counts == {}
    surveys = admin.surveys
    m.tick(0.1 + ANSWER_RETRY_S)  # looks again within ANSWER_RETRY_S, not an interval later
    assert admin.surveys == surveys + 1 and len(admin.calls) == 1
    admin.state = grown  # caught up: the new partition is probed
    m.tick(0.2 + 2 * ANSWER_RETRY_S)
    assert started == [[1]] and len(admin.calls) == 1 and m.errors.counts == {}


def test_a_topic_still_smaller_after_the_settle_time_is_grown_again() -> None:
    stale = surveyed({0: [1, 2]}, {1, 2})
    admin = FakeAdmin(stale)
    m, _ = manager(admin)
    m.tick(0.0)
    admin.state = stale  # e.g. deleted and recreated meanwhile
    m.tick(0.1)
    assert len(admin.calls) == 1
    m.tick(0.2 + GROWN_SETTLE_S)
    assert len(admin.calls) == 2 and admin.calls[1] == ("create_partitions", T, 1, [[2, 1]])
