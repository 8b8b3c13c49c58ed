"""In-flight tracking: exactly one echo per probe message, and honest counts of everything odd.

Pure (no Kafka): the agent feeds it sends, acks and arrivals with probe-clock timestamps and
publishes what it returns. Memory is bounded by rate × loss timeout in flight plus a bounded
memory of recently lost messages (to recognise arrivals after loss).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from monitor.core.echo import Echo

#: Remembered lost messages per tracker, to count late arrivals instead of double counting.
LOST_MEMORY = 200_000


@dataclass(slots=True)
class InFlight:
    """A sent message awaiting its return."""

    intended_us: int
    sent_us: int
    leader: int
    acked_us: int | None = None


@dataclass
class PartitionStats:
    """Counters of one probe-topic partition."""

    sent: int = 0
    acked: int = 0
    received: int = 0
    lost: int = 0
    late_after_loss: int = 0
    duplicates: int = 0
    out_of_order: int = 0
    send_errors: dict[str, int] = field(default_factory=dict)


class Tracker:
    """Messages in flight, keyed (partition, seq), in send order."""

    def __init__(
        self, probe: str, cluster: str, topic: str, size: int, loss_timeout_us: int
    ) -> None:
        self.probe, self.cluster, self.topic, self.size = probe, cluster, topic, size
        self.loss_timeout_us = loss_timeout_us
        self.in_flight: dict[tuple[int, int], InFlight] = {}
        self.stats: dict[int, PartitionStats] = {}
        self._highest_seq: dict[int, int] = {}
        self._lost: set[tuple[int, int]] = set()
        self._lost_order: deque[tuple[int, int]] = deque()

    def _p(self, partition: int) -> PartitionStats:
        return self.stats.setdefault(partition, PartitionStats())

    def sent(self, partition: int, seq: int, intended_us: int, sent_us: int, leader: int) -> None:
        """The producer accepted the message."""
        self.in_flight[(partition, seq)] = InFlight(intended_us, sent_us, leader)
        self._p(partition).sent += 1

    def acked(self, partition: int, seq: int, acked_us: int) -> None:
        """The broker acknowledged the message."""
        msg = self.in_flight.get((partition, seq))
        if msg is not None and msg.acked_us is None:
            msg.acked_us = acked_us
        self._p(partition).acked += 1

    def send_failed(self, partition: int, error: str) -> None:
        """A produce failed for good (the message will be declared lost at its timeout)."""
        errors = self._p(partition).send_errors
        errors[error] = errors.get(error, 0) + 1

    def received(self, partition: int, seq: int, received_us: int) -> Echo | None:
        """A probe message came back; its echo, or None for duplicates and late-after-loss."""
        stats = self._p(partition)
        key = (partition, seq)
        msg = self.in_flight.pop(key, None)
        if msg is None:
            if key in self._lost:
                self._lost.discard(key)
                stats.late_after_loss += 1
            else:
                stats.duplicates += 1
            return None
        if seq < self._highest_seq.get(partition, -1):
            stats.out_of_order += 1
        else:
            self._highest_seq[partition] = seq
        stats.received += 1
        return self._echo(partition, seq, msg, received_us=received_us)

    def expire(self, now_us: int) -> list[Echo]:
        """Declare lost every message older than the loss timeout; their echoes."""
        out = []
        while self.in_flight:
            key, msg = next(iter(self.in_flight.items()))
            if msg.intended_us + self.loss_timeout_us > now_us:
                break
            del self.in_flight[key]
            self._p(key[0]).lost += 1
            self._lost.add(key)
            self._lost_order.append(key)
            if len(self._lost_order) > LOST_MEMORY:
                self._lost.discard(self._lost_order.popleft())
            out.append(self._echo(key[0], key[1], msg, lost=True))
        return out

    def _echo(
        self,
        partition: int,
        seq: int,
        msg: InFlight,
        received_us: int | None = None,
        lost: bool = False,
    ) -> Echo:
        return Echo(
            probe=self.probe,
            cluster=self.cluster,
            topic=self.topic,
            partition=partition,
            leader=msg.leader,
            seq=seq,
            size=self.size,
            intended_us=msg.intended_us,
            sent_us=msg.sent_us,
            acked_us=msg.acked_us,
            received_us=received_us,
            lost=lost,
            timeout_us=self.loss_timeout_us if lost else None,
        )
