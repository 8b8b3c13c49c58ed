"""Probe topic management (``--manage-topic``): create the topics, grow the probe topic gently.

The peers' users were hurt by aggressive management (a reassignment that pinned a broker for
hours, a crash loop where reassignment is refused), so this does the least that works:

* at start, create the probe and echo topics when missing (brokers × k partitions);
* every ``manage_interval``, when a broker joined (it leads nothing and is nobody's preferred
  leader), add one partition led by it, placed explicitly: existing replicas never move;
* a preferred-leader election only under ``--rebalance``; never a reassignment.

At most one admin call is in flight (a future, checked on each housekeeping tick, never waited
for), and a refused call (ACLs, a managed cloud) is counted by ``(op, error)``, backs the next
try off, and leaves the probe running. Without ``--manage-topic`` the manager only surveys, so
the broker gauges still show a broker that leads no probe partition.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any, Protocol, runtime_checkable

from kafkautil.acls import CLUSTER_NAME, lacks
from kafkautil.admin import Survey, refusal
from probes.config import MAX_TOTAL_RATE
from probes.planner import (
    PartitionPlanner,
    initial_partitions,
    initial_replication,
    placement,
    preferred_elections,
)
from probes.transport import Receiver

log = logging.getLogger("nines.probe")

#: The longest wait after refusals (the interval doubles per refusal up to this).
MAX_BACKOFF_S = 3600.0
#: How long a created topic may take to show a leader for every partition.
CREATED_WAIT_S = 10.0
#: :func:`ensure_topic`'s reason when the cluster accepted the connection and said nothing.
NO_ANSWER = "no answer"
#: While a silent cluster keeps topics from being created, the survey is asked again this soon,
#: not a ``manage_interval`` later: the topics are made within seconds of its first answer (at
#: the 60 s default the probe topic came 57 s after it, every message of it counted lost).
ANSWER_RETRY_S = 2.0
#: Seconds after partitions were added during which a survey that shows fewer is taken as
#: metadata not yet caught up, not as partitions missing: the broker that answers may not know
#: them yet (a loaded CI-like run asked again at once and was refused "Topic already has 3
#: partition(s)", counted as an error and logged the new broker as staying unprobed).
GROWN_SETTLE_S = 30.0


class Admin(Protocol):
    """The admin calls management uses (:class:`kafkautil.admin.TopicAdmin` on Kafka)."""

    def survey(self, topic: str, *, known: bool = False) -> Survey | None: ...

    def create_topic(self, topic: str, partitions: int, replication_factor: int) -> Future[Any]: ...

    def create_partitions(
        self, topic: str, existing: int, placement: Sequence[Sequence[int]]
    ) -> Future[Any]: ...

    def elect_preferred(self, topic: str, partitions: Sequence[int]) -> Future[Any]: ...

    def poll(self) -> None: ...


@runtime_checkable
class Growable(Protocol):
    """A transport that can start receiving partitions added while it probes."""

    def add_receiver(self, partitions: list[int]) -> Receiver | None:
        """Read ``partitions`` back from now on: a receiver of their own to poll on a thread of
        its own, or None when the transport's ``receive`` already covers them."""
        ...


#: The right each admin call needs (kafkautil.acls): operation and resource; the name is the
#: topic's, or the cluster's.
RIGHTS = {
    "create_topic": ("CREATE", "TOPIC"),
    "create_partitions": ("ALTER", "TOPIC"),
    "elect_leaders": ("ALTER", "CLUSTER"),
}


class AdminErrors:
    """Refused admin calls by ``(op, error)``: counted, logged, never fatal."""

    def __init__(self) -> None:
        self.counts: dict[tuple[str, str], int] = {}

    def count(self, op: str, topic: str, exc: BaseException) -> str:
        """Count one refusal; its error name, with the missing right when it is an
        authorization failure (``kafkautil.acls.lacks``). The caller says it."""
        error = refusal(exc)
        self.counts[(op, error)] = self.counts.get((op, error), 0) + 1
        operation, resource = RIGHTS.get(op, ("", ""))
        return lacks(error, operation, resource, CLUSTER_NAME if resource == "CLUSTER" else topic)

    def refused(self, op: str, topic: str, exc: BaseException, consequence: str = "") -> str:
        """:meth:`count`, and log it (a warning the first time per ``(op, error)``, then at
        DEBUG: the count and the alert tell the rest): the probe goes on."""
        first = (op, refusal(exc)) not in self.counts
        why = self.count(op, topic, exc)
        shown = why if why != refusal(exc) else str(exc)
        log.log(
            logging.WARNING if first else logging.DEBUG,
            "%s %s refused: %s (the probe goes on%s)",
            op,
            topic,
            shown,
            consequence,
        )
        return why


def ensure_topic(
    admin: Admin,
    topic: str,
    per_broker: int,
    replication_factor: int | None,
    errors: AdminErrors,
) -> str | None:
    """Create ``topic`` if the cluster has none (brokers × ``per_broker`` partitions) and wait,
    bounded, until each partition has a leader.

    None when the topic exists afterwards, else why not (the refusal's error name and the
    missing right, counted, or ``no answer``): the caller decides what a missing topic means,
    and says it.
    """
    found = admin.survey(topic)
    if found is None:
        return NO_ANSWER
    if found.exists:
        return None
    partitions = initial_partitions(len(found.brokers), per_broker)
    rf = initial_replication(len(found.brokers), replication_factor)
    try:
        admin.create_topic(topic, partitions, rf).result()
    except Exception as exc:
        return errors.count("create_topic", topic, exc)
    log.info("created %s: %d partitions, replication factor %d", topic, partitions, rf)
    deadline = time.monotonic() + CREATED_WAIT_S
    while time.monotonic() < deadline:
        found = admin.survey(topic)
        if found is not None and found.exists and min(found.leaders.values()) >= 0:
            break
        time.sleep(0.1)
    return None


class TopicManager:
    """Surveys the probe topic every ``interval_s`` and, when managing, keeps every broker led.

    ``tick`` runs on the probe's housekeeping thread; ``on_new`` is called there with the
    partitions to probe from now on (they appeared in a survey).
    """

    def __init__(
        self,
        admin: Admin,
        planner: PartitionPlanner,
        on_new: Callable[[list[int]], None],
        *,
        manage: bool,
        rebalance: bool,
        replication_factor: int | None,
        interval_s: float,
        errors: AdminErrors,
    ) -> None:
        self.admin, self.planner, self.on_new = admin, planner, on_new
        self.manage, self.rebalance = manage, rebalance
        self.replication_factor, self.interval_s = replication_factor, interval_s
        self.errors = errors
        self.topic = planner.topic
        #: The admin call in flight: (op, future), at most one.
        self.pending: tuple[str, Future[Any]] | None = None
        self.failures = 0
        self._next_s = 0.0
        self._capped = False
        #: Brokers the partitions being added would have the probe probe.
        self._unled: list[int] = []
        #: Topics to create once their cluster answers: (admin, topic, partitions per broker).
        self._later: list[tuple[Admin, str, int]] = []
        #: The partition count asked for by the call in flight, and once it succeeded, that
        #: count and until when a survey showing fewer is stale (``GROWN_SETTLE_S``).
        self._asked = 0
        self._grown: tuple[int, float] | None = None

    def create_when_answered(self, admin: Admin, topic: str, per_broker: int) -> None:
        """``--manage-topic`` on a cluster that was silent at start: create ``topic`` at the
        first survey it answers (the probe topic's partitions are then probed as they appear)."""
        self._later.append((admin, topic, per_broker))

    def tick(self, now_s: float) -> None:
        """Probe the partitions the leader refresh found, settle the call in flight, then survey
        (and act) when the interval has passed."""
        self.admin.poll()  # librdkafka's log lines, queued for the probe's log, must not pile up
        if self._probe(self.planner.grow_seen()):
            self._next_s = now_s  # survey now: the brokers that lead them
        if self.pending is not None:
            if not self.pending[1].done():
                return
            self._settle(now_s)
        if now_s < self._next_s:
            return
        self._next_s = now_s + self.interval_s
        found = self.admin.survey(self.topic, known=True)  # the probe is probing it
        if found is None:
            if self._later:  # topics wait for the cluster's first answer: ask again soon
                self._next_s = now_s + min(self.interval_s, ANSWER_RETRY_S)
            return
        if self._later and self._create_later():
            self._next_s = now_s  # survey at once: the created topic's partitions are probed
            return
        self._probe(self.planner.grow(found))  # managed or not: every partition is probed
        if self.manage:
            self._act(found, now_s)

    def _create_later(self) -> bool:
        """Create the topics a silent cluster kept from being created at start, now that it
        answers; whether any was. A refusal is counted and said (:class:`AdminErrors`), and
        tried again at the next survey."""
        created = False
        for item in list(self._later):
            admin, topic, per_broker = item
            if ensure_topic(admin, topic, per_broker, self.replication_factor, self.errors) is None:
                self._later.remove(item)
                created = True
        return created

    def _probe(self, new: list[int]) -> bool:
        """Hand partitions that appeared to ``on_new``; whether there were any."""
        if new:
            log.info("probing new partitions %s of %s", new, self.topic)
            self.on_new(new)
        return bool(new)

    def _act(self, found: Survey, now_s: float) -> None:
        if not found.exists:  # deleted: partitions cannot be added (nor is it re-created)
            return
        if self._grown is not None:
            total, until_s = self._grown
            if len(found.leaders) < total and now_s < until_s:
                # the partitions just added are not in this broker's metadata yet: look again
                # soon, and do not ask for them twice
                self._next_s = now_s + min(self.interval_s, ANSWER_RETRY_S)
                return
            self._grown = None
        if self.rebalance:
            elect = preferred_elections(found)
            if elect:
                self._call("elect_leaders", now_s, self.admin.elect_preferred, self.topic, elect)
                return
        add = placement(found, self.replication_factor)
        if not add:
            return
        total = len(found.leaders) + len(add)
        if self.planner.rate_per_s * total > MAX_TOTAL_RATE:
            if not self._capped:
                log.warning(
                    "brokers %s lead no partition of %s, but %d partitions at %g/s would exceed "
                    "the probe's limit of %g/s: not adding partitions",
                    [r[0] for r in add],
                    self.topic,
                    total,
                    self.planner.rate_per_s,
                    MAX_TOTAL_RATE,
                )
                self._capped = True
            return
        log.info("adding %d partition(s) to %s, placed %s", len(add), self.topic, add)
        self._unled = sorted(r[0] for r in add)
        self._asked = total
        self._call(
            "create_partitions",
            now_s,
            self.admin.create_partitions,
            self.topic,
            len(found.leaders),
            add,
        )

    def _call(self, op: str, now_s: float, fn: Callable[..., Future[Any]], *args: Any) -> None:
        try:
            self.pending = (op, fn(*args))
        except Exception as exc:  # refused before it was sent (e.g. unsupported by the client)
            self._refused(op, exc, now_s)

    def _settle(self, now_s: float) -> None:
        assert self.pending is not None
        op, future = self.pending
        self.pending = None
        try:
            future.result()
        except Exception as exc:
            self._refused(op, exc, now_s)
            return
        self.failures = 0
        self._next_s = now_s  # survey at once: the new partitions are to be probed
        if op == "create_partitions":
            self._grown = (self._asked, now_s + GROWN_SETTLE_S)

    def _refused(self, op: str, exc: BaseException, now_s: float) -> None:
        unprobed = f"; brokers {self._unled} stay unprobed" if self._unled else ""
        self.errors.refused(op, self.topic, exc, unprobed)
        self.failures += 1
        self._next_s = now_s + self.backoff_s()

    def backoff_s(self) -> float:
        """The wait before the next survey after ``failures`` refusals in a row."""
        return float(min(self.interval_s * 2 ** min(self.failures, 32), MAX_BACKOFF_S))
