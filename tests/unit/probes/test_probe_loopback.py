"""The whole agent through an in-memory transport: the composition, without Kafka.

The loopback acks and returns every message at once (except the ones it is told to lose), so
what is checked is the wiring: one echo per message, threads, counters, shutdown.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Iterable
from typing import Any

from core.echo import Echo
from core.echo_v2 import decode_message
from probes import ProbeAgent, ProbeConfig
from probes.transport import AckReport, Layout

THREADS = {"nines-send", "nines-receive", "nines-acks", "nines-house", "nines-hiccup"}


class Loopback:
    """A Transport whose broker acks and delivers instantly; ``lose`` never comes back."""

    def __init__(self, layout: Layout, lose: set[tuple[int, int]]) -> None:
        self.layout, self.lose = layout, lose
        self.reports: deque[Any] = deque()
        self.arrivals: deque[bytes] = deque()
        self.receiving: list[int] | None = None
        self.closed = self.released = False

    def discover(self) -> Layout:
        return self.layout

    def leaders(self) -> dict[int, int] | None:
        return dict(self.layout.leaders)

    def open_receiver(self, partitions: list[int]) -> None:
        self.receiving = partitions

    def send(self, partition: int, seq: int, payload: bytes, report: AckReport) -> None:
        self.reports.append(lambda: report(partition, seq, None))
        if (partition, seq) not in self.lose:
            self.arrivals.append(payload)

    def serve_reports(self, timeout_s: float) -> None:
        if not self.reports:
            time.sleep(timeout_s / 10)
        while self.reports:
            self.reports.popleft()()

    def receive(self, timeout_s: float) -> Iterable[bytes | None] | None:
        if not self.arrivals:
            time.sleep(timeout_s / 10)
            return None
        return [self.arrivals.popleft() for _ in range(len(self.arrivals))]

    def close_receiver(self) -> None:
        self.closed = True

    def release(self) -> None:
        self.released = True


class Sink:
    """An echo producer that delivers on every poll."""

    def __init__(self) -> None:
        self.queued: deque[Any] = deque()
        self.delivered: list[bytes] = []

    def produce(self, topic: str, *, key: str, value: bytes, on_delivery: Any) -> None:
        self.queued.append((value, on_delivery))

    def poll(self, timeout: float) -> int:
        while self.queued:
            value, done = self.queued.popleft()
            self.delivered.append(value)
            done(None, None)
        return 0

    def flush(self, timeout: float) -> int:
        return self.poll(timeout)

    def __len__(self) -> int:
        return len(self.queued)


def test_agent_wires_schedule_producer_consumer_tracker_and_publisher() -> None:
    layout = Layout({0: 1, 1: 2}, frozenset({1, 2, 3}))
    transport, sink = Loopback(layout, lose={(1, 2)}), Sink()
    config = ProbeConfig(
        bootstrap="loopback:0",
        rate=200,
        duration=0.5,
        loss_timeout=0.3,
        hiccup_interval=0.1,
        metrics_port=0,
        probe_id="loop",
        cluster="c",
    )
    agent = ProbeAgent(config, transport=transport, echo_sink=sink).start()
    assert {t.name for t in threading.enumerate()} >= THREADS
    assert transport.receiving == [0, 1] == agent.partitions
    assert agent.wait(10)
    agent.stop()
    assert not THREADS & {t.name for t in threading.enumerate()}

    records = [r for v in sink.delivered for r in decode_message(v)]
    echoes = [r for r in records if isinstance(r, Echo)]
    assert len(records) - len(echoes) >= 3  # hiccup records, one per 0.1 s
    stats = agent.stats()
    for p in (0, 1):
        n = agent.schedule.next_seq[p]
        # open loop: every message intended in the 0.5 s is sent, however late: 100 at 200/s
        assert n == stats["partitions"][p]["sent"] == 100
        assert sorted(e.seq for e in echoes if e.partition == p) == list(range(n))
        assert {e.leader for e in echoes if e.partition == p} == {layout.leaders[p]}
    lost = [e for e in echoes if e.lost]
    assert [(e.partition, e.seq, e.timeout_us) for e in lost] == [(1, 2, 300_000)]
    assert all(e.acked_us is not None and e.received_us is not None for e in echoes if not e.lost)
    assert stats["partitions"][1]["lost"] == 1 and stats["in_flight"] == 0
    assert stats["leaders"] == {0: 1, 1: 2}
    assert stats["echoes_published"] == len(records) and stats["echo_dropped"] == 0
    assert stats["echo_buffered"] == 0
    assert transport.closed and transport.released and agent.publisher.sink is None
    assert agent.unresolved_at_stop == 0
    sent = sum(s["sent"] for s in stats["partitions"].values())
    assert agent.summary() == (
        f"stopped: sent={sent} received={sent - 1} lost=1 unresolved=0 "
        f"echo_records_published={len(records)} echo_dropped=0 handoff_lost=0"
    )
