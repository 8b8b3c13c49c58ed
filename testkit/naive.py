"""A deliberately naive closed-loop prober: send, wait for the message to come back, send the next.

This is how most broker monitors measure, and it is wrong: during a stall it waits with the
broker, takes one slow sample, and omits every message a real client would have sent meanwhile
(coordinated omission). The baseline that tests and benchmarks compare against; not product code.
"""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any


class NaiveProber:
    """Closed loop on one partition; latencies measured from the *actual* send time."""

    def __init__(self, bootstrap: str, topic: str, partition: int, interval_s: float) -> None:
        self.bootstrap, self.topic, self.partition = bootstrap, topic, partition
        self.interval_s = interval_s
        self.latencies_us: list[int] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> NaiveProber:
        """Start probing in a background thread."""
        from confluent_kafka import Consumer, Producer, TopicPartition

        self._producer = Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 0})
        self._consumer = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": f"naive-{uuid.uuid4().hex}",
                "enable.auto.commit": False,
                "fetch.wait.max.ms": 10,
            }
        )
        tp = TopicPartition(self.topic, self.partition)
        _, high = self._consumer.get_watermark_offsets(tp, timeout=5)
        self._consumer.assign([TopicPartition(self.topic, self.partition, high)])
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stop.is_set():
            token = uuid.uuid4().bytes
            started = time.monotonic_ns()
            self._producer.produce(self.topic, value=token, partition=self.partition)
            self._producer.poll(0)
            if not self._await(token):
                return
            elapsed_us = (time.monotonic_ns() - started) // 1000
            self.latencies_us.append(elapsed_us)
            time.sleep(max(0.0, self.interval_s - elapsed_us / 1e6))

    def _await(self, token: bytes) -> bool:
        while not self._stop.is_set():
            m = self._consumer.poll(0.05)  # returns on the first arrival, not after the timeout
            if m is not None and not m.error() and m.value() == token:
                return True
            self._producer.poll(0)
        return False

    def stop(self) -> list[int]:
        """Stop and return the measured latencies (µs)."""
        self._stop.set()
        if self._thread:
            self._thread.join(5)
        self._consumer.close()
        return self.latencies_us

    def __enter__(self) -> NaiveProber:
        return self.start()

    def __exit__(self, *_: Any) -> None:
        self.stop()
