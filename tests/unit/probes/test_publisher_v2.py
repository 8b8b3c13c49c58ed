"""The v2 publisher: batches of at most N records or 100 ms, bounded, drops counted per record."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import pytest
from test_probe_loopback import THREADS, Loopback
from test_probe_loopback import Sink as DeliveringSink
from test_probe_parts import Sink, echo

from core.config import ConfigError, build
from core.echo import Echo, Hiccup
from core.echo_v2 import decode_batch
from probes import ProbeAgent, ProbeConfig
from probes.publisher import MAX_IN_FLIGHT, BatchingEchoPublisher, EchoPublisher, publisher_for
from probes.transport import Layout

T0 = 1_795_000_000_000_000


def publisher(sink: Any, **kw: Any) -> BatchingEchoPublisher:
    pub = BatchingEchoPublisher("nines.echoes", "p1", **{"capacity": 100, **kw})
    pub.open(sink)
    return pub


def records(sink: Sink) -> list[list[Echo | Hiccup]]:
    return [decode_batch(v) for _, _, v, _ in sink.queued]  # type: ignore[misc]


def test_a_batch_is_sent_when_it_holds_n_records_keyed_by_probe() -> None:
    sink = Sink()
    pub = publisher(sink, batch_echoes=3, linger_s=60)
    for seq in range(7):
        pub.publish(echo(seq))
    assert [(t, k) for t, k, _, _ in sink.queued] == [("nines.echoes", "p1")] * 2
    assert records(sink) == [[echo(0), echo(1), echo(2)], [echo(3), echo(4), echo(5)]]
    assert pub.buffered == 7 and pub.published == 0
    pub.flush(1.0)  # sends the last one, then the sink delivers everything
    assert pub.published == 7 and pub.buffered == 0 and pub.dropped == 0


def test_a_batch_is_sent_on_poll_or_when_a_publish_finds_it_linger_s_old() -> None:
    sink = Sink()
    pub = publisher(sink, batch_echoes=1000, linger_s=0.05)
    pub.publish(echo(0))
    assert sink.queued == []
    pub.poll()  # the housekeeper's call, every 100 ms
    assert records(sink) == [[echo(0)]]
    pub.poll()  # nothing to send: no empty batch
    assert len(sink.queued) == 1
    pub.publish(echo(1))
    time.sleep(0.06)
    pub.publish(echo(2))  # the publish that finds the batch old sends it, itself included
    assert records(sink)[1:] == [[echo(1), echo(2)]]


def test_records_of_another_source_start_a_new_batch() -> None:
    sink = Sink()
    pub = publisher(sink, linger_s=60)
    hiccup = Hiccup("p1", "c", T0, T0 + 1_000_000, 300, 900, 1000)
    other_topic = Echo("p1", "c", "other", 0, 1, 9, 512, T0, T0 + 5, None, T0 + 100)
    for r in (hiccup, echo(0), echo(1), other_topic, hiccup):
        pub.publish(r)
    pub.send()
    assert records(sink) == [[echo(0), echo(1), hiccup], [other_topic, hiccup]]


def test_every_record_of_a_dropped_batch_is_counted(caplog: pytest.LogCaptureFixture) -> None:
    sink = Sink(capacity=1)
    pub = publisher(sink, capacity=5, batch_echoes=2, linger_s=60)
    with caplog.at_level(logging.WARNING, logger="nines.probe"):
        for seq in range(4):
            pub.publish(echo(seq))  # the first batch fits, the sink refuses the second
        assert pub.dropped == 2 and pub.buffered == 2
        sink.deliver(err=type("Err", (), {"str": lambda self: "Broker: timed out"})())
    assert pub.dropped == 4 and pub.published == 0 and pub.buffered == 0
    assert [r.getMessage() for r in caplog.records] == [
        "dropping echo records (echo buffer full): 2 dropped so far; probing continues"
    ]


def test_capacity_bounds_the_records_in_the_sink_not_its_messages() -> None:
    sink = Sink(capacity=1000)
    pub = publisher(sink, capacity=5, batch_echoes=2, linger_s=60)
    for seq in range(8):
        pub.publish(echo(seq))
    assert len(sink.queued) == 2 and pub.dropped == 4  # 4 records fit in 5; the rest are counted
    assert pub.buffered == 4
    pub.release()
    assert pub.sink is None and pub.buffered == 4


def test_concurrent_publishers_lose_nothing() -> None:
    sink = DeliveringSink()
    pub = publisher(sink, capacity=100_000, batch_echoes=7, linger_s=60)

    def burst(k: int) -> None:
        for i in range(500):
            pub.publish(echo(k * 1000 + i))

    threads = [threading.Thread(target=burst, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    pub.flush(5.0)
    seqs = sorted(r.seq for v in sink.delivered for r in decode_batch(v))  # type: ignore[union-attr]
    assert seqs == sorted(k * 1000 + i for k in range(4) for i in range(500))
    assert pub.published == 2000 and pub.buffered == 0 and pub.dropped == 0


def test_at_most_max_in_flight_messages_wait_in_the_sink_and_the_rest_merge() -> None:
    """A slow echo cluster: the sink reports nothing for a while. The publisher keeps at most
    MAX_IN_FLIGHT messages in it (below librdkafka's idempotence window, past which it spins),
    and merges what waits, so the records go out in fewer messages once reports return."""
    sink = Sink(capacity=1_000)
    pub = publisher(sink, capacity=100_000, batch_echoes=10, linger_s=60)
    for seq in range(200):
        pub.publish(echo(seq))
    assert len(sink.queued) == MAX_IN_FLIGHT
    assert pub.buffered == 200  # nothing dropped or lost: 40 in the sink, 160 waiting here
    reports = [done for *_, done in sink.queued]
    sink.queued.clear()
    for done in reports:  # the reports return: the 160 waiting leave as one merged message
        done(None, None)
    assert [len(b) for b in records(sink)] == [160]
    pub.flush(1.0)
    assert pub.published == 200 and pub.buffered == 0 and pub.dropped == 0
    assert len(sink.queued) == 0


def test_echo_format_selects_the_publisher_and_is_validated() -> None:
    base = {"bootstrap": "x:1", "probe_id": "p"}
    assert type(publisher_for(ProbeConfig(**base))) is BatchingEchoPublisher  # the default
    assert type(publisher_for(ProbeConfig(**base, echo_format="v1"))) is EchoPublisher
    v2 = publisher_for(ProbeConfig(**base, echo_format="v2", echo_batch=50, echo_buffer=9))
    assert isinstance(v2, BatchingEchoPublisher) and (v2.batch_echoes, v2.capacity) == (50, 9)
    with pytest.raises(ConfigError, match=r"probe\.echo_format"):
        build(ProbeConfig, base, {"echo_format": "v3"}, prefix="probe")
    with pytest.raises(ConfigError, match=r"probe\.echo_batch: .*between 1 and 10,000"):
        build(ProbeConfig, base, {"echo_batch": 0}, prefix="probe")


def test_the_agent_publishes_every_echo_once_in_a_few_v2_batches() -> None:
    layout = Layout({0: 1, 1: 2}, frozenset({1, 2}))
    transport, sink = Loopback(layout, lose={(0, 3)}), DeliveringSink()
    config = ProbeConfig(
        bootstrap="loopback:0",
        rate=400,
        duration=0.5,
        loss_timeout=0.3,
        hiccup_interval=0.1,
        metrics_port=0,
        probe_id="loop",
        cluster="c",
        echo_format="v2",
    )
    agent = ProbeAgent(config, transport=transport, echo_sink=sink).start()
    assert agent.wait(10)
    agent.stop()
    assert not THREADS & {t.name for t in threading.enumerate()}
    got = [r for v in sink.delivered for r in decode_batch(v)]
    echoes = [r for r in got if isinstance(r, Echo)]
    assert len(got) - len(echoes) >= 3  # hiccups travel in the same batches
    for p in (0, 1):
        n = agent.schedule.next_seq[p]
        assert n >= 180 and sorted(e.seq for e in echoes if e.partition == p) == list(range(n))
    assert [(e.partition, e.seq) for e in echoes if e.lost] == [(0, 3)]
    assert len(sink.delivered) < len(got) / 5  # batched: ~400 records in a handful of messages
    assert agent.echoes_published == len(got) and agent.echo_dropped == 0


def test_at_stop_what_the_echo_cluster_did_not_take_is_dropped_and_counted() -> None:
    """A stop whose last flush ran out (the echo cluster down, or stalled past the shutdown
    timeout): the batch, the batches waiting for a place in flight, and the messages queued in
    a real librdkafka producer are counted dropped, never left out of the totals."""
    import socket

    from confluent_kafka import Producer

    with socket.socket() as s:  # a port nothing listens on: every message stays queued
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    sink = Producer({"bootstrap.servers": f"127.0.0.1:{port}", "log_level": 0})
    pub = publisher(sink, batch_echoes=3, linger_s=60, capacity=10_000)
    total = 3 * (MAX_IN_FLIGHT + 2) + 1  # 4 messages in the sink, 2 batches waiting, 1 record
    for seq in range(total):
        pub.publish(echo(seq))
    pub.flush(0.3)
    assert pub.published == 0 and pub.buffered == total
    assert pub.give_up() == 0  # nothing reached a broker: nothing in flight
    assert pub.dropped == total and pub.buffered == 0
