"""The partition planner: which partitions to probe, who leads each, and which brokers go unprobed.

A probe sends to every partition of its topic, so a broker is probed only if it leads one. The
plan is pure (built from a :class:`~probes.transport.Layout`); :class:`PartitionPlanner` keeps
the leaders current while probing, so each echo names the broker that led its partition.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass

from core.config import ConfigError
from kafkautil.admin import Survey
from kafkautil.metadata import NoAnswer
from probes.config import MAX_TOTAL_RATE
from probes.transport import Layout, Transport

log = logging.getLogger("nines.probe")


@dataclass(frozen=True, slots=True)
class Plan:
    """What to probe."""

    partitions: list[int]
    leaders: dict[int, int]
    #: Brokers that lead no partition of the topic, so nothing probes them.
    idle_brokers: list[int]


def plan(layout: Layout, rate_per_s: float) -> Plan:
    """Every partition at ``rate_per_s``; ConfigError if the total exceeds the hard limit."""
    partitions = sorted(layout.leaders)
    total = rate_per_s * len(partitions)
    if total > MAX_TOTAL_RATE:
        raise ConfigError(
            f"rate: {rate_per_s:g}/s × {len(partitions)} partitions "
            f"= {total:g}/s exceeds the limit of {MAX_TOTAL_RATE:g}/s"
        )
    leaders = {p: layout.leaders[p] for p in partitions}
    idle = sorted(layout.brokers - set(leaders.values()))
    return Plan(partitions, leaders, idle)


#: Metadata answers in a row without the probe topic before it is said to be gone.
ABSENT_ANSWERS = 2


def follow(leaders: dict[int, int], seen: Mapping[int, int]) -> None:
    """Apply a metadata refresh; a partition without a leader just now keeps its last one."""
    for p, leader in seen.items():
        if leader >= 0:
            leaders[p] = leader


class PartitionPlanner:
    """The probe's partitions and their current leaders (``leaders`` is guarded by ``lock``).

    Every metadata answer about the topic (the housekeeper's leader refresh, topic management's
    survey) passes through here: leaders are followed, a partition the probe does not probe yet
    is offered to :meth:`grow_seen`, and the topic's going and coming back is said in one line.
    """

    def __init__(
        self, topic: str, rate_per_s: float, lock: threading.Lock, fleet: bool = False
    ) -> None:
        self.topic, self.rate_per_s, self._lock = topic, rate_per_s, lock
        #: A fleet replica (``probes.fleet``): the group assigns ``partitions``, and coverage
        #: (unprobed brokers and partitions) is the fleet's, i.e. the topic's.
        self.fleet = fleet
        self.partitions: list[int] = []
        #: Updated in place, so every holder sees the refreshes.
        self.leaders: dict[int, int] = {}
        #: The cluster's brokers, as last seen (at start, then by topic management's surveys).
        self.brokers: frozenset[int] = frozenset()
        #: The topic's partitions → leaders in the cluster's last answer about it.
        self.seen: dict[int, int] = {}
        #: Whether the last answer had the topic; None before the cluster answered at all.
        self.exists: bool | None = None
        #: ``time.monotonic()`` of the cluster's last metadata answer; None before the first.
        self.answered_s: float | None = None
        #: New partitions last refused for the rate limit (said once, not at every offer).
        self._capped: list[int] = []
        #: Answers in a row without the topic.
        self._absent = 0

    def discover(self, transport: Transport) -> Plan:
        """Plan from the transport's layout; warn when a broker leads no partition.

        A cluster that accepts connections and says nothing (``NoAnswer``) is probed from when
        it answers: an empty plan now, the partitions through :meth:`grow_seen` later.
        """
        try:
            layout = transport.discover()
        except NoAnswer as exc:
            log.warning(
                "%s; probing starts anyway and takes in %s's partitions once it answers "
                "(nines_probe_metadata_age_seconds)",
                exc,
                self.topic,
            )
            return Plan([], {}, [])
        if self.fleet:  # every leader followed; the group assigns what to probe, within the limit
            idle = sorted(layout.brokers - set(layout.leaders.values()))
            planned = Plan([], dict(layout.leaders), idle)
        else:
            planned = plan(layout, self.rate_per_s)
        self.partitions = planned.partitions
        self.leaders.update(planned.leaders)
        self.brokers = layout.brokers
        self._saw(layout.leaders)
        if planned.idle_brokers:
            log.warning(
                "brokers %s lead no partition of %s, so they are not probed; add partitions "
                "(or reassign leaders) so that every broker leads at least one",
                planned.idle_brokers,
                self.topic,
            )
        return planned

    def unprobed(self) -> frozenset[int]:
        """Brokers that lead no probed partition now (call under the lock); of a fleet, no
        partition of the topic (the group has every partition probed by some replica)."""
        probed = self.leaders if self.fleet else self.partitions
        return self.brokers - {self.leaders[p] for p in probed if p in self.leaders}

    def unprobed_partitions(self) -> list[int]:
        """Partitions of the topic, as last seen, that the probe does not probe (yet); none for a
        fleet replica (the group assigns every partition; ``nines_probe_partition_probed``)."""
        if self.fleet:
            return []
        return sorted(set(self.seen) - set(self.partitions))

    def _saw(self, leaders: Mapping[int, int]) -> None:
        """Take in one metadata answer: ``leaders`` of the topic's partitions, empty when the
        cluster says it has no such topic."""
        with self._lock:
            self.answered_s = time.monotonic()
            # gone only when two answers in a row say so: just after a deletion, a broker whose
            # metadata lags may still show the topic, and the lines would flap
            self._absent = 0 if leaders else self._absent + 1
            before = self.exists
            if leaders or self._absent >= ABSENT_ANSWERS or before is None:
                self.exists = bool(leaders)
            self.seen = dict(leaders)
            follow(
                self.leaders,
                {p: b for p, b in leaders.items() if self.fleet or p in self.leaders},
            )
        if before is not False and self.exists is False:
            log.warning(
                "%s: the cluster has no such topic now (deleted?): its messages are counted "
                "lost until it is back (nines_probe_topic_exists)",
                self.topic,
            )
        elif before is False and leaders:
            log.info("%s is back, with %d partitions: probing it again", self.topic, len(leaders))

    def observe(self, survey: Survey) -> None:
        """Take in a survey's brokers and the leaders of the probed partitions."""
        with self._lock:
            self.brokers = survey.brokers
        if survey.exists:
            self._saw(survey.leaders)
        else:  # absent or refused (a survey does not tell them apart): the refresh decides
            with self._lock:
                self.answered_s = time.monotonic()

    def grow(self, survey: Survey) -> list[int]:
        """:meth:`observe`, then :meth:`grow_seen`."""
        self.observe(survey)
        return self.grow_seen()

    def grow_seen(self) -> list[int]:
        """Take in the partitions last seen that are not probed yet (returned: to be probed from
        now on), unless the probe's total rate would pass its hard limit."""
        if self.fleet:  # the group assigns new partitions
            return []
        with self._lock:
            seen = dict(self.seen)
            probed = set(self.partitions)
            # a new partition without a leader yet cannot be read back: taken in once it has one
            new = sorted(p for p in seen if p not in probed and seen[p] >= 0)
            total = len(self.partitions) + len(new)
            capped = bool(new) and self.rate_per_s * total > MAX_TOTAL_RATE
            if not capped:
                for p in new:
                    self.leaders[p] = seen[p]
                self.partitions = sorted([*self.partitions, *new])
        if not capped:
            self._capped = []
            return new
        if new != self._capped:
            self._capped = new
            log.warning(
                "not probing new partitions %s of %s: %g/s × %d partitions exceeds the limit of "
                "%g/s (nines_probe_partitions_unprobed)",
                new,
                self.topic,
                self.rate_per_s,
                total,
                MAX_TOTAL_RATE,
            )
        return []

    def forget(self, partitions: list[int]) -> None:
        """Undo :meth:`grow_seen` for ``partitions`` (they could not be probed after all; the
        next answer that shows them offers them again)."""
        with self._lock:
            for p in partitions:
                self.leaders.pop(p, None)
                self.seen.pop(p, None)
            self.partitions = [p for p in self.partitions if p not in partitions]

    def refresh(self, transport: Transport) -> None:
        """Follow leader moves, and offer new partitions to :meth:`grow_seen` (which reads them
        back before they are probed: the refresh never probes them itself); nothing changes
        when the cluster does not answer."""
        seen = transport.leaders()
        if seen is not None:
            self._saw(seen)


# -- topic management (``--manage-topic``): pure decisions, made from a kafkautil Survey --------


def initial_partitions(brokers: int, per_broker: int) -> int:
    """Partitions of a topic created for ``brokers`` brokers: ``per_broker`` each, at least one."""
    return max(1, brokers) * per_broker


def initial_replication(brokers: int, wanted: int | None) -> int:
    """The replication factor of a created topic: ``wanted``, or 3, never more than the brokers."""
    return max(1, min(wanted or 3, brokers))


def joined(survey: Survey) -> list[int]:
    """Unprobed brokers that are no partition's preferred leader: brokers that joined.

    A broker that is some partition's preferred leader leads nothing only for a while (it
    restarted; the cluster's leader rebalance gives it back its partitions): adding a partition
    for every restart would grow the topic without bound.
    """
    preferred = {r[0] for r in survey.replicas.values() if r}
    return sorted(survey.unprobed - preferred)


def placement(survey: Survey, wanted_rf: int | None) -> list[list[int]]:
    """Replicas of the partitions to add so that every broker that joined leads one: one
    partition per :func:`joined` broker, led by it (its first replica), its followers the
    brokers holding the fewest replicas.

    The replication factor is ``wanted_rf``, else the topic's own (its first partition's).
    Existing partitions are never touched: this only places new ones.
    """
    first = survey.replicas.get(min(survey.replicas), []) if survey.replicas else []
    rf = max(1, min(wanted_rf or len(first) or 1, len(survey.brokers)))
    held = dict.fromkeys(survey.brokers, 0)
    for replicas in survey.replicas.values():
        for b in replicas:
            if b in held:
                held[b] += 1
    out = []
    for leader in joined(survey):
        followers = sorted((b for b in held if b != leader), key=lambda b: (held[b], b))
        replicas = [leader, *followers[: rf - 1]]
        for b in replicas:
            held[b] += 1
        out.append(replicas)
    return out


def preferred_elections(survey: Survey) -> list[int]:
    """Partitions whose preferred leader leads nothing now: an election would probe it.

    Used only under ``--rebalance``; one partition per unprobed broker.
    """
    chosen: dict[int, int] = {}
    for p in sorted(survey.replicas):
        replicas = survey.replicas[p]
        if replicas and replicas[0] in survey.unprobed and survey.leaders.get(p) != replicas[0]:
            chosen.setdefault(replicas[0], p)
    return sorted(chosen.values())
