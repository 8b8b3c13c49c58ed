"""The open-loop schedule: message k of a partition is intended at t0 + k / rate, whatever happens.

When the probe falls behind (broker stall, full queue, its own pause) the backlog keeps its
original intended times: nothing is skipped or re-timed, so a stall is counted for every message
that should have been sent during it.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field


@dataclass
class Schedule:
    """Per-partition fixed-rate schedule.

    ``aligned``: every partition's message k is intended at the same instant (one tick), so
    the partitions a broker leads share its produce requests. Otherwise staggered: partition i
    of n is offset by i / (rate × n), so no two partitions send in lock step and each sample
    is taken on its own.
    """

    partitions: list[int]
    rate_per_s: float
    t0_us: int
    next_seq: dict[int, int] = field(default_factory=dict)
    aligned: bool = False

    def __post_init__(self) -> None:
        self.next_seq = {p: 0 for p in self.partitions}
        #: Partition → next seq of the partitions :meth:`remove` took out.
        self._removed: dict[int, int] = {}
        n = len(self.partitions)
        self._offset_us = {
            p: 0 if self.aligned else int(i * 1e6 / (self.rate_per_s * n))
            for i, p in enumerate(self.partitions)
        }
        # (intended_us, partition, seq) of each partition's next message: the earliest is on
        # top, so a send costs O(log partitions), not a scan of them all.
        self._due = [(self.intended_us(p, 0), p, 0) for p in self.partitions]
        heapq.heapify(self._due)

    def add(self, partition: int, start_us: int) -> None:
        """Schedule a partition added while probing: its next message is intended at
        ``start_us``; a partition :meth:`remove` took out goes on from its next seq, so no seq
        of a partition is sent twice (the tracker keys messages by partition and seq)."""
        # a partition given back before the sender noticed it went: its old times are void
        self.remove(partition)
        seq = self._removed.pop(partition, 0)
        self.next_seq[partition] = seq
        self._offset_us[partition] = start_us - self.t0_us - int(seq * 1e6 / self.rate_per_s)
        heapq.heappush(self._due, (start_us, partition, seq))

    def remove(self, partition: int) -> None:
        """Stop scheduling ``partition`` (a probe fleet moved it to another replica)."""
        if partition not in self.next_seq:
            return
        self._removed[partition] = self.next_seq.pop(partition)
        self._due = [entry for entry in self._due if entry[1] != partition]
        heapq.heapify(self._due)

    def intended_us(self, partition: int, seq: int) -> int:
        """When message ``seq`` of ``partition`` is supposed to be sent."""
        return self.t0_us + self._offset_us[partition] + int(seq * 1e6 / self.rate_per_s)

    def next_due(self) -> tuple[int, int, int]:
        """(intended_us, partition, seq) of the earliest unsent message."""
        return self._due[0]

    def advance(self, partition: int) -> None:
        """Mark the partition's next message (the one ``next_due`` returned) as sent."""
        seq = self.next_seq[partition] = self.next_seq[partition] + 1
        entry = (self.intended_us(partition, seq), partition, seq)
        if self._due[0][1] == partition:
            heapq.heapreplace(self._due, entry)
        else:  # not the earliest partition: find and replace its entry (O(partitions))
            i = next(i for i, (_, p, _) in enumerate(self._due) if p == partition)
            self._due[i] = entry
            heapq.heapify(self._due)
