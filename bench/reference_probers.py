"""Stand-in probers for the CTRL+Z test, used only while ``probes`` has not landed.

``OpenLoopProber`` sends on a fixed schedule and measures from the intended send time (nines'
method); ``ClosedLoopProber`` sends, waits for the message to come back, then paces the next one
(the naive method). Both are deliberately minimal: the point is the measurement method, and the
report says when these stood in for ``probes.ProbeAgent`` / ``probes.naive``.
"""

from __future__ import annotations

import struct
import threading
import time
from typing import Any

_FMT = struct.Struct(">qq")  # seq, intended (or sent) monotonic ns


def _clients(bootstrap: str, topic: str) -> tuple[Any, Any]:
    """A low-latency producer and a consumer already assigned to the topic's partition 0."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    producer = Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 0, "message.timeout.ms": 60_000}
    )
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-ref-{topic}-{time.time_ns()}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 5,
        }
    )
    consumer.assign([TopicPartition(topic, 0)])
    return producer, consumer


class OpenLoopProber:
    """Fixed-rate sends; latency = receive time − intended send time (no coordinated omission)."""

    label = "reference open-loop prober (stand-in for probes.ProbeAgent)"

    def __init__(self, bootstrap: str, topic: str, rate: float) -> None:
        self.topic, self.rate = topic, rate
        self.producer, self.consumer = _clients(bootstrap, topic)
        self.latencies_us: list[int] = []
        self.sent = 0
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        """Start the send schedule and the receive loop."""
        self._threads = [
            threading.Thread(target=self._send, daemon=True),
            threading.Thread(target=self._receive, daemon=True),
        ]
        for t in self._threads:
            t.start()

    def _send(self) -> None:
        """Send message ``seq`` at ``t0 + seq / rate``, never waiting for an answer."""
        t0 = time.monotonic_ns()
        seq = 0
        while not self._stop.is_set():
            intended = t0 + int(seq * 1e9 / self.rate)
            delay = (intended - time.monotonic_ns()) / 1e9
            if delay > 0:
                time.sleep(delay)
            self.producer.produce(self.topic, _FMT.pack(seq, intended))
            self.producer.poll(0)
            seq += 1
            self.sent = seq

    def _receive(self) -> None:
        """Record every arrival's latency from its intended send time."""
        while not self._stop.is_set() or len(self.latencies_us) < self.sent:
            msg = self.consumer.poll(0.05)
            if msg is None or msg.error():
                if self._stop.is_set() and msg is None and self._drained():
                    break
                continue
            _, intended = _FMT.unpack(msg.value())
            self.latencies_us.append((time.monotonic_ns() - intended) // 1000)

    def _drained(self) -> bool:
        """After stop, give up once nothing has arrived for a while."""
        return time.monotonic() > self._stopped_at + 10.0

    def stop(self) -> None:
        """Stop sending, let the backlog arrive (up to 10 s), close the clients."""
        self._stopped_at = time.monotonic()
        self._stop.set()
        self._threads[0].join()
        self.producer.flush(10)
        self._threads[1].join()
        self.consumer.close()


class ClosedLoopProber:
    """Send, wait for the message to come back, pace, repeat: the naive way (coordinated)."""

    label = "reference closed-loop prober (stand-in for probes.naive)"

    def __init__(self, bootstrap: str, topic: str, rate: float) -> None:
        self.topic, self.rate = topic, rate
        self.producer, self.consumer = _clients(bootstrap, topic)
        self.latencies_us: list[int] = []

    def run(self, stop: threading.Event) -> None:
        """Probe until ``stop`` is set; one sample per round trip."""
        seq = 0
        while not stop.is_set():
            sent = time.monotonic_ns()
            self.producer.produce(self.topic, _FMT.pack(seq, sent))
            self.producer.poll(0)
            while True:
                msg = self.consumer.poll(0.05)
                if msg is not None and not msg.error() and _FMT.unpack(msg.value())[0] == seq:
                    self.latencies_us.append((time.monotonic_ns() - sent) // 1000)
                    break
                if stop.is_set() and msg is None:
                    break
            seq += 1
            pause = sent / 1e9 + 1 / self.rate - time.monotonic_ns() / 1e9
            if pause > 0:
                time.sleep(pause)
        self.consumer.close()
