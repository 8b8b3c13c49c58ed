"""``nines broker`` over real TCP: every message produced comes back, in order per partition."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, KafkaError, Message, TopicPartition
from kafka_cluster import consumer, producer

from testbroker import EmbeddedBroker

N_MESSAGES = 50_000


def test_default_topics_spread_leaders_over_brokers(fresh_broker: EmbeddedBroker) -> None:
    md = producer(fresh_broker.bootstrap).list_topics(timeout=10)
    assert sorted(md.brokers) == [1, 2, 3]
    probe = md.topics["nines.probe"]
    assert probe.error is None
    assert {p: probe.partitions[p].leader for p in probe.partitions} == {0: 1, 1: 2, 2: 3}
    assert len(md.topics["nines.echoes"].partitions) == 2


def test_50k_messages_all_back_in_order(fresh_broker: EmbeddedBroker) -> None:
    topic, partitions = "nines.probe", 3
    prod = producer(fresh_broker.bootstrap, linger_ms=5, acks="all")
    acked: list[int] = []
    errors: list[KafkaError] = []

    def on_delivery(err: KafkaError | None, msg: object) -> None:
        if err is not None:
            errors.append(err)
        else:
            acked.append(1)

    t0 = time.perf_counter()
    for seq in range(N_MESSAGES):
        while True:
            try:
                prod.produce(
                    topic, value=b"%d" % seq, partition=seq % partitions, on_delivery=on_delivery
                )
                break
            except BufferError:
                prod.poll(0.01)
        prod.poll(0)
    assert prod.flush(30) == 0
    produce_s = time.perf_counter() - t0
    assert not errors and len(acked) == N_MESSAGES

    cons = consumer(fresh_broker.bootstrap)
    cons.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    seen: dict[int, list[int]] = {p: [] for p in range(partitions)}
    t0 = time.perf_counter()
    deadline = time.monotonic() + 60
    total = 0
    while total < N_MESSAGES and time.monotonic() < deadline:
        for msg in cons.consume(10_000, timeout=1.0):
            assert msg.error() is None, msg.error()
            seen[msg.partition()].append(int(msg.value()))
            total += 1
    consume_s = time.perf_counter() - t0
    cons.close()

    for p in range(partitions):
        assert seen[p] == list(range(p, N_MESSAGES, partitions)), f"partition {p} differs"
    rates = f"produce {N_MESSAGES / produce_s:,.0f} msg/s, consume {N_MESSAGES / consume_s:,.0f}"
    print(f"\n{rates} msg/s")


def test_fixed_port_forwarder_roundtrip() -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    # brokers=1 so only one port must be free; the forwarder advertises it in Metadata too
    with EmbeddedBroker(brokers=1, topics=[("fixed", 1)], port=port) as b:
        assert b.bootstrap == f"127.0.0.1:{port}"
        prod = producer(b.bootstrap, reconnect_backoff_max_ms=300)
        md = prod.list_topics(timeout=10)
        assert md.brokers[1].port == port
        for i in range(1000):
            prod.produce("fixed", value=b"%d" % i)
        assert prod.flush(20) == 0
        cons = consumer(b.bootstrap)
        cons.assign([TopicPartition("fixed", 0, 0)])
        got: list[int] = []
        deadline = time.monotonic() + 20
        while len(got) < 1000 and time.monotonic() < deadline:
            got += [int(m.value()) for m in cons.consume(1000, timeout=0.5) if not m.error()]
        cons.close()
        assert got == list(range(1000))

        # Faults act through the forwarder too: down -> no ack, up -> delivered.
        b.down(1)
        acked: list[KafkaError | None] = []
        prod.produce("fixed", value=b"late", on_delivery=lambda e, m: acked.append(e))
        deadline = time.monotonic() + 1.5
        while time.monotonic() < deadline:
            prod.poll(0.1)
        assert acked == []
        b.up(1)
        assert prod.flush(20) == 0 and acked == [None]


def test_retention_limit_drops_oldest_offsets_as_documented() -> None:
    """5 MiB of record batches per partition: the low watermark moves, the newest survive."""
    value = b"x" * 1000
    with EmbeddedBroker(brokers=1, topics=[("ret", 1)]) as b:
        prod = producer(b.bootstrap, linger_ms=20)
        n = 8000  # ~8 MB, well over the limit
        for _ in range(n):
            prod.produce("ret", value=value, partition=0)
            prod.poll(0)
        assert prod.flush(30) == 0
        cons = consumer(b.bootstrap)
        lo, hi = cons.get_watermark_offsets(TopicPartition("ret", 0), timeout=10)
        assert hi == n
        assert lo > 0, "nothing was dropped: the retention limit in --help is wrong"
        retained_bytes = (hi - lo) * len(value)
        assert 4 * 2**20 < retained_bytes <= 5 * 2**20
        cons.assign([TopicPartition("ret", 0, lo)])
        first = wait_for_message(cons)
        assert first.offset() == lo
        cons.close()


def wait_for_message(cons: Consumer, timeout_s: float = 10) -> Message:
    """The next real message (not a partition-EOF event) within ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        msg = cons.poll(0.5)
        if msg is not None and msg.error() is None:
            return msg
    raise AssertionError(f"no message within {timeout_s} s")
