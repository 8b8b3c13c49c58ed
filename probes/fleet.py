"""A probe fleet: replicas of one probe share a cluster, each probing the partitions that Kafka's
consumer group on the probe topic assigns it (``fleet_group``; docs/deploy.md, "A probe fleet").

The group is only the assignment: nothing is committed, and a partition taken over is read back
from its log end. What a handoff must not do is lose a message silently or count it twice, so a
revocation, before it completes, first stops the sender from sending to the partitions (the
sender checks ownership under the agent's lock, with the send), then ends each of their messages
in flight exactly once (:meth:`probes.tracker.Tracker.hand_off`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from core.echo import Echo
from probes.clock import ProbeClock
from probes.config import MAX_TOTAL_RATE
from probes.planner import PartitionPlanner
from probes.tracker import Tracker

log = logging.getLogger("nines.probe")


class FleetShare:
    """This replica's partitions; the group's callbacks call :meth:`assigned` and
    :meth:`revoked` (on the receive thread, inside the consumer's poll)."""

    def __init__(
        self,
        lock: threading.Lock,
        tracker: Tracker,
        planner: PartitionPlanner,
        clock: ProbeClock,
        publish: Callable[[Echo], None],
        start_delay_us: int,
    ) -> None:
        self.lock, self.tracker, self.planner, self.clock = lock, tracker, planner, clock
        self.publish, self.start_delay_us = publish, start_delay_us
        #: The partitions this replica probes: the producer's ``owned`` (same object, changed
        #: only under ``lock``).
        self.owned: set[int] = set()
        #: Where the sender takes in partitions (``ProbeProducer.join``); set once it exists.
        self.join: Callable[[list[int], int], None] | None = None
        #: Set at shutdown: partitions released by closing the consumer are not handed off (what
        #: is still in flight then is ``unresolved``, counted once by the stop).
        self.closing = False

    def assigned(self, partitions: list[int]) -> list[int]:
        """The group gave this replica ``partitions`` (read back from their log ends already):
        probe them from a moment on, within the probe's rate limit; those probed are returned."""
        rate = self.planner.rate_per_s
        with self.lock:
            room = int(MAX_TOTAL_RATE // rate) - len(self.owned)
            new = sorted(set(partitions) - self.owned)
            taken, refused = new[: max(0, room)], new[max(0, room) :]
            self.owned.update(taken)
            self.planner.partitions = sorted(self.owned)
        if refused:
            log.warning(
                "fleet: not probing partitions %s assigned to this replica: %g/s × %d partitions "
                "would exceed the limit of %g/s (add replicas)",
                refused,
                rate,
                len(self.owned) + len(refused),
                MAX_TOTAL_RATE,
            )
        if taken:
            log.info("fleet: probing partitions %s", taken)
            assert self.join is not None, "the sender takes partitions in once it exists"
            self.join(taken, self.clock.now_us() + self.start_delay_us)
        return taken

    def revoked(self, partitions: list[int]) -> None:
        """The group takes ``partitions`` away: no send to them from now on, and each message
        in flight to them ends now (received, or counted ``handoff_lost``)."""
        gone = set(partitions)
        with self.lock:
            self.owned.difference_update(gone)
            self.planner.partitions = sorted(self.owned)
            echoes = [] if self.closing else self.tracker.hand_off(gone)
        for echo in echoes:
            self.publish(echo)
        if gone and not self.closing:
            log.info("fleet: partitions %s moved to another replica", sorted(gone))
