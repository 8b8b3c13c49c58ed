"""The consumer side of a probe: receive its own messages back and stamp their arrival.

Broker-neutral: arrivals come from a :class:`~probes.transport.Transport`; messages of other
probes (or anything that is not a probe message) on the same topic are skipped.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable

from core.echo import Echo
from probes.clock import ProbeClock
from probes.payload import decode
from probes.tracker import Tracker
from probes.transport import Receiver


class ProbeConsumer:
    """Feeds arrivals of this probe's messages to the tracker (under ``lock``)."""

    def __init__(
        self,
        transport: Receiver,
        tracker: Tracker,
        lock: threading.Lock,
        clock: ProbeClock,
        probe: bytes,
        publish: Callable[[Echo], None],
    ) -> None:
        self.transport, self.tracker, self.lock, self.clock = transport, tracker, lock, clock
        self.probe, self.publish = probe, publish

    def receive_until(self, drained: threading.Event) -> None:
        """Receive until ``drained``."""
        while not drained.is_set():
            arrived = self.transport.receive(0.05)
            if arrived is None:
                continue
            # Stamp before reading the batch but after the transport drained it: the drain can
            # return messages sent after its first one arrived (this thread may wait for the GIL
            # in between), and a stamp taken before it gave them received_us < intended_us.
            # Now it is late by at most the drain's duration.
            self.arrived(arrived, self.clock.now_us())

    def arrived(self, payloads: Iterable[bytes | None], received_us: int) -> None:
        """Payloads that arrived at ``received_us``: this probe's go to the tracker."""
        for value in payloads:
            head = decode(value)
            if head is None or head.probe != self.probe:
                continue
            with self.lock:
                echo = self.tracker.received(head.partition, head.seq, received_us)
            if echo is not None:
                self.publish(echo)
