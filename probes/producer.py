"""The producer side of a probe: send on the open-loop schedule, stamp each ack as it arrives.

Broker-neutral: messages go out through a :class:`~probes.transport.Transport`. The sender never
waits for an ack or an echo: when it falls behind, the backlog keeps its intended times.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable

from core.echo import Echo
from kafkautil.acls import lacks
from probes.clock import ProbeClock
from probes.payload import encode
from probes.schedule import Schedule
from probes.tracker import Tracker
from probes.transport import NO_ACK, Transport

log = logging.getLogger("nines.probe")


def refusal_name(exc: Exception) -> str:
    """The send-error name of a refused send: the client's error code name when it has one
    (confluent-kafka's ``KafkaError.name()``), else the exception's type."""
    code = exc.args[0] if exc.args else None
    name = getattr(code, "name", None)
    return name() if callable(name) else type(exc).__name__


#: Longest nap of the sender before a message is due, and its wait on a full queue (seconds).
MAX_NAP_US = 5_000
FULL_QUEUE_WAIT_S = 0.005


class ProbeProducer:
    """Sends every scheduled message and feeds its send and delivery report to the tracker.

    ``lock`` guards the tracker (and ``leaders``), shared with the consumer and housekeeping.
    """

    def __init__(
        self,
        transport: Transport,
        schedule: Schedule,
        tracker: Tracker,
        lock: threading.Lock,
        clock: ProbeClock,
        leaders: dict[int, int],
        probe: bytes,
        size: int,
        publish: Callable[[Echo], None],
        duration_s: float | None = None,
        owned: set[int] | None = None,
    ) -> None:
        self.transport, self.schedule, self.tracker = transport, schedule, tracker
        #: A fleet replica's partitions (``probes.fleet``, changed under ``lock``): a partition
        #: not in it is never sent to again, and leaves the schedule; None: every partition.
        self.owned = owned
        self.lock, self.clock, self.leaders = lock, clock, leaders
        self.probe, self.size, self.publish = probe, size, publish
        self.end_us = None if duration_s is None else schedule.t0_us + int(duration_s * 1e6)
        #: Refusals already logged (one line per kind; every one is counted).
        self._refusals_seen: set[str] = set()
        #: (partition, start_us) of partitions to add to the schedule; only the sender touches it.
        self._joining: deque[tuple[int, int]] = deque()

    def join(self, partitions: list[int], start_us: int) -> None:
        """Probe ``partitions`` too, from ``start_us`` (any thread; the sender takes them in)."""
        self._joining.extend((p, start_us) for p in partitions)

    def send_until(self, stopping: threading.Event) -> None:
        """Send each message at its intended time until ``stopping`` or the duration ends."""
        schedule, clock, tracker, lock = self.schedule, self.clock, self.tracker, self.lock
        send, report = self.transport.send, self.reported
        while not stopping.is_set():
            while self._joining:
                schedule.add(*self._joining.popleft())
            now = clock.now_us()
            if not schedule.next_seq:  # nothing to probe yet (a cluster silent at start)
                if self.end_us is not None and now >= self.end_us:
                    return
                stopping.wait(MAX_NAP_US / 1e6)
                continue
            intended, partition, seq = schedule.next_due()
            if self.end_us is not None and intended >= self.end_us:
                # the last message is sent; the duration is not over until its end (at a low
                # rate the next message may be due seconds after it)
                if now >= self.end_us:
                    return
                stopping.wait(min(self.end_us - now, MAX_NAP_US) / 1e6)
                continue
            if intended > now:
                time.sleep(min(intended - now, MAX_NAP_US) / 1e6)
                continue
            payload = encode(self.probe, partition, seq, intended, self.size)
            leader = self.leaders.get(partition, -1)
            owned = self.owned
            gone = False
            while True:
                try:
                    # Under the lock: the delivery report (another thread) and the message
                    # itself (the receiver) must not reach the tracker before the send does;
                    # and a fleet's revocation (``probes.fleet``) cannot slip between the
                    # ownership check and the send.
                    with lock:
                        if owned is not None and partition not in owned:
                            gone = True
                            break
                        send(partition, seq, payload, report)
                        tracker.sent(partition, seq, intended, clock.now_us(), leader)
                    break
                except BufferError:  # the queue is full: wait, keep the intended time
                    time.sleep(FULL_QUEUE_WAIT_S)  # the delivery-report thread frees the queue
                    if stopping.is_set():
                        return
                except Exception as exc:  # refused at once: a send error, and the sender goes on
                    self._refused(partition, seq, intended, leader, exc)
                    break
            if gone:
                schedule.remove(partition)
                continue
            schedule.advance(partition)

    def _refused(
        self, partition: int, seq: int, intended: int, leader: int, exc: Exception
    ) -> None:
        """A send the client refused on the spot (e.g. librdkafka's _FATAL after an idempotence
        failure): counted under its error's name, like a failed delivery, never ending the
        sender (which would stop every partition's schedule without a word)."""
        error = refusal_name(exc)
        if error not in self._refusals_seen:
            self._refusals_seen.add(error)
            why = lacks(error, "WRITE", "TOPIC", self.tracker.topic)
            shown = exc if why == error else why
            log.warning("partition %d: the client refused a send: %s", partition, shown)
        with self.lock:
            self.tracker.sent(partition, seq, intended, self.clock.now_us(), leader)
            echo = self.tracker.send_failed(partition, seq, error)
        if echo is not None:
            self.publish(echo)

    def serve_acks(self, drained: threading.Event) -> None:
        """Serve delivery reports as they arrive, until ``drained``."""
        while not drained.is_set():
            self.transport.serve_reports(0.05)

    def reported(self, partition: int, seq: int, error: str | None) -> None:
        """A delivery report: stamp it first, then hand the tracker's echo (if any) on."""
        now = self.clock.now_us()
        with self.lock:
            if error is None:
                echo = self.tracker.acked(partition, seq, now)
            elif error == NO_ACK:
                echo = self.tracker.handed_over(partition, seq)
            else:
                echo = self.tracker.send_failed(partition, seq, error)
        if echo is not None:
            self.publish(echo)
