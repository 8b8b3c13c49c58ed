"""In-flight tracking: exactly one echo per probe message, and honest counts of everything odd.

Pure (no Kafka): the agent feeds it sends, delivery reports and arrivals with probe-clock
timestamps and publishes what it returns. A message's echo is emitted once both its arrival and
its delivery report are known (or at its loss deadline), so a message consumed back before the
producer reported its ack still carries ``acked_us``.

Memory is bounded by what is in flight (rate × loss timeout) plus the memory of lost messages,
which recognises arrivals after loss (see :class:`LostRuns` for its bound).
"""

from __future__ import annotations

from array import array
from bisect import bisect_right
from dataclasses import dataclass, field

from core.echo import Echo

#: A lost message is remembered until this many loss timeouts after its intended time, i.e. for
#: ``LOST_MEMORY_TIMEOUTS - 1`` loss timeouts after it was declared lost.
LOST_MEMORY_TIMEOUTS = 4


@dataclass(slots=True)
class InFlight:
    """A sent message whose echo has not been emitted yet."""

    intended_us: int
    sent_us: int
    leader: int
    acked_us: int | None = None
    #: The producer's delivery report (ack or failure) arrived.
    reported: bool = False
    #: Consumed back; the echo waits for the delivery report.
    received_us: int | None = None


@dataclass
class PartitionStats:
    """Counters of one probe-topic partition."""

    sent: int = 0
    #: Probe-clock time of the last send (0: none yet).
    last_sent_us: int = 0
    acked: int = 0
    received: int = 0
    lost: int = 0
    #: In flight to a partition when a probe fleet moved it to another replica, not back by then.
    handoff_lost: int = 0
    late_after_loss: int = 0
    duplicates: int = 0
    out_of_order: int = 0
    send_errors: dict[str, int] = field(default_factory=dict)


class LostRuns:
    """The lost seqs of one partition, as sorted disjoint runs ``[start, end)``.

    Losses are declared in send order, so a partition's lost seqs arrive in increasing order and
    an outage of any length is a single run. Each run keeps the intended time of its newest
    message; :meth:`forget` drops runs older than the memory horizon, and ``forgotten_below``
    is the seq below which nothing is remembered any more.

    Bound: a run holds at least one lost message, and only messages intended within the horizon
    (``LOST_MEMORY_TIMEOUTS`` loss timeouts, of which the first passes before a message can be
    declared lost) are kept. So at most ``rate × (LOST_MEMORY_TIMEOUTS - 1) × loss_timeout / 2``
    runs per partition (the worst case is every other message lost; an outage is one run), at
    24 bytes each: 21.6 MB at the 20,000 msgs/s limit with the default 30 s timeout; nothing
    when nothing is lost. Arrivals are classified exactly within the horizon; see
    :meth:`take` for the rest.
    """

    __slots__ = ("ends", "forgotten_below", "last_us", "starts")

    def __init__(self) -> None:
        self.starts = array("q")
        self.ends = array("q")
        self.last_us = array("q")
        self.forgotten_below = 0

    def __len__(self) -> int:
        return len(self.starts)

    def add(self, seq: int, intended_us: int) -> None:
        """Remember ``seq`` as lost (seqs come in increasing order)."""
        if self.ends and self.ends[-1] == seq:
            self.ends[-1] = seq + 1
            self.last_us[-1] = intended_us
        else:
            self.starts.append(seq)
            self.ends.append(seq + 1)
            self.last_us.append(intended_us)

    def take(self, seq: int) -> bool | None:
        """Forget ``seq`` as lost because it arrived after all.

        True: it was declared lost. False: it was not (so it arrived before: a duplicate).
        None: it is older than anything remembered. That arrival is at least
        ``LOST_MEMORY_TIMEOUTS`` loss timeouts after its intended time. Counting it as late
        after loss is wrong only if it is the repeat of a message that arrived in time. Such a
        repeat is a producer retry, written within the producer's message timeout (loss
        timeout + 5 s). The consumer would then have to lag the log by about two loss timeouts,
        and in that case the messages around it are being declared lost anyway.
        """
        i = bisect_right(self.starts, seq) - 1
        if i < 0 or seq >= self.ends[i]:
            return None if seq < self.forgotten_below else False
        start, end = self.starts[i], self.ends[i]
        if end - start == 1:
            del self.starts[i], self.ends[i], self.last_us[i]
        elif seq == start:
            self.starts[i] = seq + 1
        elif seq == end - 1:
            self.ends[i] = seq
        else:  # split; both halves keep the newer intended time (forgotten no earlier)
            self.ends[i] = seq
            self.starts.insert(i + 1, seq + 1)
            self.ends.insert(i + 1, end)
            self.last_us.insert(i + 1, self.last_us[i])
        return True

    def forget(self, horizon_us: int) -> None:
        """Drop the runs whose newest message was intended before ``horizon_us``."""
        n = 0
        while n < len(self.last_us) and self.last_us[n] < horizon_us:
            n += 1
        if n:
            self.forgotten_below = self.ends[n - 1]
            del self.starts[:n], self.ends[:n], self.last_us[:n]


class Tracker:
    """Messages in flight, keyed (partition, seq), in send order."""

    def __init__(
        self,
        probe: str,
        cluster: str,
        topic: str,
        size: int,
        loss_timeout_us: int,
        system: str = "kafka",
    ) -> None:
        self.probe, self.cluster, self.topic, self.size = probe, cluster, topic, size
        self.system = system
        self.loss_timeout_us = loss_timeout_us
        #: Every sent message without an echo yet (including ``held`` ones).
        self.in_flight: dict[tuple[int, int], InFlight] = {}
        #: Received messages whose echo waits for the delivery report.
        self.held = 0
        self.stats: dict[int, PartitionStats] = {}
        self.lost_runs: dict[int, LostRuns] = {}
        self._highest_seq: dict[int, int] = {}

    @property
    def unreceived(self) -> int:
        """Messages sent and neither received nor lost yet."""
        return len(self.in_flight) - self.held

    def _p(self, partition: int) -> PartitionStats:
        return self.stats.setdefault(partition, PartitionStats())

    def sent(self, partition: int, seq: int, intended_us: int, sent_us: int, leader: int) -> None:
        """The producer accepted the message."""
        self.in_flight[(partition, seq)] = InFlight(intended_us, sent_us, leader)
        stats = self._p(partition)
        stats.sent += 1
        stats.last_sent_us = sent_us

    def acked(self, partition: int, seq: int, acked_us: int) -> Echo | None:
        """The broker acknowledged the message; its echo if it was already received."""
        self._p(partition).acked += 1
        return self._reported(partition, seq, acked_us)

    def handed_over(self, partition: int, seq: int) -> Echo | None:
        """The broker took the message but acknowledges nothing (core NATS, Redis pub/sub):
        reported without ``acked_us``, so its publish latency is absent rather than invented."""
        return self._reported(partition, seq, None)

    def send_failed(self, partition: int, seq: int, error: str) -> Echo | None:
        """A produce failed for good; the echo of a message that came back anyway.

        Otherwise the message is declared lost at its timeout, unless it still arrives.
        """
        errors = self._p(partition).send_errors
        errors[error] = errors.get(error, 0) + 1
        return self._reported(partition, seq, None)

    def _reported(self, partition: int, seq: int, acked_us: int | None) -> Echo | None:
        msg = self.in_flight.get((partition, seq))
        if msg is None or msg.reported:
            return None
        msg.reported, msg.acked_us = True, acked_us
        if msg.received_us is None:
            return None
        self.held -= 1
        del self.in_flight[(partition, seq)]
        return self._echo(partition, seq, msg, received_us=msg.received_us)

    def received(self, partition: int, seq: int, received_us: int) -> Echo | None:
        """A probe message came back; its echo (once reported), or None for repeats."""
        stats = self._p(partition)
        msg = self.in_flight.get((partition, seq))
        if msg is None or msg.received_us is not None:
            runs = self.lost_runs.get(partition)
            if msg is None and runs is not None and runs.take(seq) is not False:
                # (never sent is impossible: the consumer starts at the end of the topic)
                stats.late_after_loss += 1
            else:
                stats.duplicates += 1
            return None
        if seq < self._highest_seq.get(partition, -1):
            stats.out_of_order += 1
        else:
            self._highest_seq[partition] = seq
        stats.received += 1
        msg.received_us = received_us
        if not msg.reported:
            self.held += 1
            return None
        del self.in_flight[(partition, seq)]
        return self._echo(partition, seq, msg, received_us=received_us)

    def expire(self, now_us: int) -> list[Echo]:
        """Echoes of every message past its loss timeout: lost, or received but never reported."""
        # One pass from the oldest (the dict is in send order, so intended order). Not
        # next(iter()) per message: deleted entries stay at the front of a dict until it
        # resizes, so that rescans them every time: quadratic, 3.6 s for 100,000 losses, under
        # the agent's lock.
        expired = []
        for key, msg in self.in_flight.items():
            if msg.intended_us + self.loss_timeout_us > now_us:
                break
            expired.append((key, msg))
        out = []
        for key, msg in expired:
            done = self._end_held(key, msg)
            if done is not None:
                out.append(done)
                continue
            partition, seq = key
            self._p(partition).lost += 1
            runs = self.lost_runs.get(partition)
            if runs is None:
                runs = self.lost_runs[partition] = LostRuns()
            runs.add(seq, msg.intended_us)
            out.append(self._echo(partition, seq, msg, lost=True))
        horizon_us = now_us - LOST_MEMORY_TIMEOUTS * self.loss_timeout_us
        for runs in self.lost_runs.values():
            runs.forget(horizon_us)
        return out

    def hand_off(self, partitions: set[int]) -> list[Echo]:
        """The fleet moved ``partitions`` to another replica (the sender stopped sending to them
        first): each of their messages in flight ends now, exactly once. One received already
        gets its echo (its delivery report, if it comes, is ignored); one not back is counted
        ``handoff_lost`` and gets no echo, since the broker did not lose it: this replica stopped
        reading (the stream's loss counts the broker's losses only)."""
        gone = [(k, m) for k, m in self.in_flight.items() if k[0] in partitions]
        out = []
        for key, msg in gone:
            done = self._end_held(key, msg)
            if done is not None:
                out.append(done)
            else:
                self._p(key[0]).handoff_lost += 1
        return out

    def _end_held(self, key: tuple[int, int], msg: InFlight) -> Echo | None:
        """``msg`` leaves the in-flight set; its echo if it was received already (held for its
        delivery report), else None: the caller says how it ended."""
        del self.in_flight[key]
        if msg.received_us is None:
            return None
        self.held -= 1
        return self._echo(*key, msg, received_us=msg.received_us)

    def release_held(self) -> list[Echo]:
        """At shutdown: echoes of the received messages still waiting for a delivery report."""
        held = [(k, m) for k, m in self.in_flight.items() if m.received_us is not None]
        for key, _ in held:
            del self.in_flight[key]
        self.held = 0
        return [self._echo(p, s, m, received_us=m.received_us) for (p, s), m in held]

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
            system=self.system,
        )
