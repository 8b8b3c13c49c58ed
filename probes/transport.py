"""The broker-specific edge of a probe: send one message and report its ack; deliver what arrives.

Everything else in a probe (schedule, tracker, hiccup meter, echo publisher, partition planner)
is broker-neutral and reaches the probed broker only through a ``Transport``. Kafka's is
:class:`probes.kafka.KafkaTransport`; ``probes.systems.open_transport`` picks the one the URL
names. Echo records always go to the Kafka echo topic (through the echo publisher), whatever the
probed broker is.
"""

from __future__ import annotations

import logging
import queue
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Final, Protocol

log = logging.getLogger("nines.probe")

#: A delivery report, ``(partition, seq, error)``: error None when the broker acknowledged the
#: message, ``NO_ACK`` when it took it but acknowledges nothing, else the error's name (e.g.
#: ``_MSG_TIMED_OUT``).
AckReport = Callable[[int, int, str | None], None]
#: The report of a broker without a publish ack (core NATS, Redis pub/sub): the message was
#: handed over, and its publish latency is absent (never the hand-over time passed off as an ack).
NO_ACK: Final = "_NO_ACK"


@dataclass(frozen=True, slots=True)
class Layout:
    """The probe topic as the cluster describes it."""

    #: Partition → id of the broker that leads it (-1 while it has none).
    leaders: dict[int, int]
    #: Every broker of the cluster, whether it leads a partition or not.
    brokers: frozenset[int]


class Receiver(Protocol):
    """A source of arrivals polled by one receive thread."""

    def receive(self, timeout_s: float) -> Iterable[bytes | None] | None:
        """The payloads that arrived, as soon as one did; None if none within ``timeout_s``."""
        ...


class Transport(Protocol):
    """What a probe needs from a broker; calls come from the probe's named threads.

    ``send`` (``nines-send``) and ``serve_reports`` (``nines-acks``) may run at the same time,
    as may ``receive`` (``nines-receive``) and ``leaders`` (``nines-house``).
    """

    def discover(self) -> Layout:
        """The probe topic's partitions and leaders; ConfigError if it cannot be probed."""
        ...

    def leaders(self) -> dict[int, int] | None:
        """Partition → leader now; None when the cluster does not answer (asked again later)."""
        ...

    def open_receiver(self, partitions: list[int]) -> None:
        """Start reading ``partitions`` back from their current end."""
        ...

    def send(self, partition: int, seq: int, payload: bytes, report: AckReport) -> None:
        """Queue one message; ``report`` is called once with its outcome, from ``serve_reports``.

        Raises BufferError when the transport's bounded queue is full: the caller waits and
        sends the same message again (its intended time is kept).
        """
        ...

    def serve_reports(self, timeout_s: float) -> None:
        """Run the delivery reports that arrived, waiting at most ``timeout_s`` for one."""
        ...

    def receive(self, timeout_s: float) -> Iterable[bytes | None] | None:
        """The payloads that arrived, as soon as one did; None if none within ``timeout_s``.

        The payloads are read lazily, so the caller can stamp the arrival before reading them.
        """
        ...

    def close_receiver(self) -> None:
        """Stop receiving (at shutdown)."""
        ...

    def release(self) -> None:
        """Drop the clients now rather than at the next garbage collection (no thread uses them)."""
        ...


#: The one-broker layout of a system without partitions (NATS, Redis, RabbitMQ): partition 0,
#: led by "broker" 0 (the server the URL names).
SINGLE = Layout({0: 0}, frozenset({0}))


#: A message waiting for the client thread: partition, seq, payload and its report.
Outgoing = tuple[int, int, bytes, AckReport]


class Outbox:
    """The hand-off between the probe's threads and a client that runs on a thread of its own.

    ``put`` (the sender) raises BufferError when ``capacity`` messages wait, as librdkafka's
    queue does; the client thread ``take``s them and files each outcome with ``report``;
    ``serve`` (the delivery-report thread) runs the reports. Reports are bounded too: one per
    message taken, and the client takes at most ``capacity`` at a time.
    """

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._todo: queue.Queue[Outgoing] = queue.Queue(capacity)
        self._reports: queue.SimpleQueue[tuple[AckReport, int, int, str | None]] = (
            queue.SimpleQueue()
        )

    def put(self, item: Outgoing) -> None:
        """Queue one message; BufferError when full (the sender waits and tries again)."""
        try:
            self._todo.put_nowait(item)
        except queue.Full:
            raise BufferError(f"send queue full ({self.capacity} messages)") from None

    def empty(self) -> bool:
        """Nothing waits to be sent."""
        return self._todo.empty()

    def take(self, timeout_s: float, most: int = 1000) -> list[Outgoing]:
        """What waits, as soon as something does (at most ``most``); [] after ``timeout_s``."""
        try:
            items = [self._todo.get(timeout=timeout_s)]
        except queue.Empty:
            return []
        while len(items) < most:
            try:
                items.append(self._todo.get_nowait())
            except queue.Empty:
                break
        return items

    def report(self, item: Outgoing, error: str | None) -> None:
        """File the outcome of one message (from the client's thread)."""
        partition, seq, _, report = item
        self._reports.put((report, partition, seq, error))

    def serve(self, timeout_s: float) -> None:
        """Run the reports filed, waiting at most ``timeout_s`` for the first."""
        try:
            report, partition, seq, error = self._reports.get(timeout=timeout_s)
        except queue.Empty:
            return
        report(partition, seq, error)
        while True:
            try:
                report, partition, seq, error = self._reports.get_nowait()
            except queue.Empty:
                return
            report(partition, seq, error)


def drain(arrivals: queue.Queue[bytes], timeout_s: float, most: int = 1000) -> list[bytes] | None:
    """The payloads in ``arrivals`` as soon as one is there; None if none within ``timeout_s``."""
    try:
        out = [arrivals.get(timeout=timeout_s)]
    except queue.Empty:
        return None
    while len(out) < most:
        try:
            out.append(arrivals.get_nowait())
        except queue.Empty:
            break
    return out


class Warnings:
    """A transport's connection trouble, logged at most once per ``every_s`` with a count of the
    rest: a server that is away for minutes yields a few lines, not one per retry."""

    def __init__(self, every_s: float = 10.0) -> None:
        self.every_s = every_s
        self._last = -float("inf")
        self._quiet = 0

    def __call__(self, message: str) -> None:
        now = time.monotonic()
        if now - self._last < self.every_s:
            self._quiet += 1
            return
        more = f" (and {self._quiet} more in the last {self.every_s:g} s)" if self._quiet else ""
        log.warning("%s%s", message, more)
        self._last, self._quiet = now, 0
