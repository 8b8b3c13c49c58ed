"""Fault injection on a live ``nines broker``: RTT, down/up, leader moves, SIGSTOP/SIGCONT."""

from __future__ import annotations

import statistics
import threading
import time

from confluent_kafka import KafkaError, Message, Producer, TopicPartition
from kafka_cluster import consumer, producer, wait_for

from testbroker import EmbeddedBroker

PROBE = "nines.probe"  # partition p is led by broker p+1


def roundtrip_ms(prod: Producer, partition: int, samples: int) -> float:
    """Median produce -> ack time of one message at a time to ``partition``."""
    times: list[float] = []
    for i in range(samples):
        done: list[KafkaError | None] = []
        t0 = time.perf_counter()
        prod.produce(
            PROBE,
            value=b"rtt-%d" % i,
            partition=partition,
            on_delivery=lambda e, m, d=done: d.append(e),
        )
        deadline = time.monotonic() + 10
        while not done and time.monotonic() < deadline:
            prod.poll(0.001)  # only this message's ack counts, not others still in flight
        times.append((time.perf_counter() - t0) * 1000)
        assert done == [None], f"no ack from partition {partition} within 10 s: {done}"
    return statistics.median(times)


def fast_producer(bootstrap: str) -> Producer:
    """No batching delay and quick reconnects, so timings reflect the broker, not the client."""
    return producer(bootstrap, linger_ms=0, reconnect_backoff_ms=50, reconnect_backoff_max_ms=300)


def test_rtt_slows_only_that_broker(fresh_broker: EmbeddedBroker) -> None:
    prod = fast_producer(fresh_broker.bootstrap)
    roundtrip_ms(prod, 1, 3)  # connect and warm up
    before_ms = roundtrip_ms(prod, 1, 7)
    other_before_ms = roundtrip_ms(prod, 0, 7)
    rtt_ms = 150
    fresh_broker.rtt(2, rtt_ms)
    after_ms = roundtrip_ms(prod, 1, 7)
    other_after_ms = roundtrip_ms(prod, 0, 7)
    print(f"\nbroker 2: {before_ms:.1f} -> {after_ms:.1f} ms; broker 1: {other_after_ms:.1f} ms")
    assert after_ms - before_ms >= 0.9 * rtt_ms
    assert other_after_ms - other_before_ms < rtt_ms / 2
    fresh_broker.rtt(2, 0)
    assert roundtrip_ms(prod, 1, 5) < before_ms + rtt_ms / 2


def test_down_blocks_acks_and_up_delivers(fresh_broker: EmbeddedBroker) -> None:
    prod = fast_producer(fresh_broker.bootstrap)
    roundtrip_ms(prod, 2, 2)
    fresh_broker.down(3)
    results: list[KafkaError | None] = []
    prod.produce(
        PROBE, value=b"while-down", partition=2, on_delivery=lambda e, m: results.append(e)
    )
    deadline = time.monotonic() + 2.0
    while time.monotonic() < deadline:
        prod.poll(0.1)
    assert results == [], "acked while its leader was down"
    # Broker 1 still answers: one broker down is not a cluster outage.
    assert roundtrip_ms(prod, 0, 2) < 1000

    fresh_broker.up(3)
    assert prod.flush(15) == 0
    assert results == [None]
    cons = consumer(fresh_broker.bootstrap)
    cons.assign([TopicPartition(PROBE, 2, 0)])
    values = wait_for(lambda: [m.value() for m in cons.consume(10, 0.5) if not m.error()], 10)
    cons.close()
    assert b"while-down" in values


def test_leader_move_shows_in_metadata(fresh_broker: EmbeddedBroker) -> None:
    prod = fast_producer(fresh_broker.bootstrap)
    assert prod.list_topics(PROBE, timeout=10).topics[PROBE].partitions[0].leader == 1
    fresh_broker.set_leader(PROBE, 0, 3)
    leader = wait_for(
        lambda: prod.list_topics(PROBE, timeout=10).topics[PROBE].partitions[0].leader == 3, 10
    )
    assert leader
    assert roundtrip_ms(prod, 0, 2) < 5000  # the producer follows the new leader


def test_sigstop_stalls_and_sigcont_resumes_with_nothing_lost(
    fresh_broker: EmbeddedBroker,
) -> None:
    prod = fast_producer(fresh_broker.bootstrap)
    roundtrip_ms(prod, 0, 2)
    acks: list[float] = []
    errors: list[KafkaError] = []
    lock = threading.Lock()

    def on_delivery(err: KafkaError | None, msg: Message) -> None:
        with lock:
            if err is not None:
                errors.append(err)
            else:
                acks.append(time.monotonic())

    sent = 0
    start = time.monotonic()
    stop_at, resume_at, end_at = start + 0.5, start + 2.0, start + 2.5
    paused = resumed = False
    interval_s = 0.002
    next_s = start
    while time.monotonic() < end_at:  # on a fixed schedule, whatever the broker does
        prod.produce(PROBE, value=b"%d" % sent, partition=sent % 3, on_delivery=on_delivery)
        sent += 1
        next_s += interval_s
        while (now := time.monotonic()) < next_s:
            prod.poll(next_s - now)
        if not paused and now >= stop_at:
            fresh_broker.pause()
            stop_at, paused = time.monotonic(), True
        if paused and not resumed and now >= resume_at:
            fresh_broker.resume()
            resume_at, resumed = time.monotonic(), True
    assert prod.flush(30) == 0
    assert not errors
    assert len(acks) == sent
    # Acks already on the wire at SIGSTOP may still land; after 200 ms nothing may answer.
    during = [t for t in acks if stop_at + 0.2 < t < resume_at]
    assert during == [], f"{len(during)} acks while the broker was stopped"
    assert any(t > resume_at for t in acks)
    print(f"\n{sent} sent, {len(acks)} acked; none in {resume_at - stop_at:.2f} s of SIGSTOP")

    cons = consumer(fresh_broker.bootstrap)
    cons.assign([TopicPartition(PROBE, p, 0) for p in range(3)])
    got: list[int] = []
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and len(got) < sent:
        got += [int(m.value()) for m in cons.consume(1000, 0.5) if m.value().isdigit()]
    cons.close()
    ours = sorted(got)
    assert ours == list(range(sent)), f"lost {sent - len(set(ours))} of {sent}"
