"""The broker-specific edge of a probe: send one message and report its ack; deliver what arrives.

Everything else in a probe (schedule, tracker, hiccup meter, echo publisher, partition planner)
is broker-neutral and reaches the probed broker only through a ``Transport``. Kafka's is
:class:`probes.kafka.KafkaTransport`. Echo records always go to the Kafka echo topic (through
the echo publisher), whatever the probed broker is.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Protocol

#: A delivery report, ``(partition, seq, error)``: error None when the broker acknowledged the
#: message, else the error's name (e.g. ``_MSG_TIMED_OUT``).
AckReport = Callable[[int, int, str | None], None]


@dataclass(frozen=True, slots=True)
class Layout:
    """The probe topic as the cluster describes it."""

    #: Partition → id of the broker that leads it (-1 while it has none).
    leaders: dict[int, int]
    #: Every broker of the cluster, whether it leads a partition or not.
    brokers: frozenset[int]


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
