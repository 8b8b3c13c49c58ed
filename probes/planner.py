"""The partition planner: which partitions to probe, who leads each, and which brokers go unprobed.

A probe sends to every partition of its topic, so a broker is probed only if it leads one. The
plan is pure (built from a :class:`~probes.transport.Layout`); :class:`PartitionPlanner` keeps
the leaders current while probing, so each echo names the broker that led its partition.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass

from core.config import ConfigError
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


def follow(leaders: dict[int, int], seen: Mapping[int, int]) -> None:
    """Apply a metadata refresh; a partition without a leader just now keeps its last one."""
    for p, leader in seen.items():
        if leader >= 0:
            leaders[p] = leader


class PartitionPlanner:
    """The probe's partitions and their current leaders (``leaders`` is guarded by ``lock``)."""

    def __init__(self, topic: str, rate_per_s: float, lock: threading.Lock) -> None:
        self.topic, self.rate_per_s, self._lock = topic, rate_per_s, lock
        self.partitions: list[int] = []
        #: Updated in place, so every holder sees the refreshes.
        self.leaders: dict[int, int] = {}

    def discover(self, transport: Transport) -> Plan:
        """Plan from the transport's layout; warn when a broker leads no partition."""
        planned = plan(transport.discover(), self.rate_per_s)
        self.partitions = planned.partitions
        self.leaders.update(planned.leaders)
        if planned.idle_brokers:
            log.warning(
                "brokers %s lead no partition of %s, so they are not probed; add partitions "
                "(or reassign leaders) so that every broker leads at least one",
                planned.idle_brokers,
                self.topic,
            )
        return planned

    def refresh(self, transport: Transport) -> None:
        """Follow leader moves (nothing changes when the cluster does not answer)."""
        seen = transport.leaders()
        if seen is not None:
            with self._lock:
                follow(self.leaders, seen)
