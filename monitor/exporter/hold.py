"""Held peaks: the largest of each value over the windows that reached the exporter lately.

A gauge of the latest closed window shows only the last of the windows that close between two
scrapes (a backlog after an outage closes the stall's window and the later ones at once). A held
peak keeps, per series, the element-wise largest of its windows' values (the max, and each
quantile of each window's own histogram: compared, never averaged) that arrived within
``hold_s``, so every window's values stay on /metrics longer than a scrape interval.

Pure bookkeeping, no I/O: the caller passes the time. Entries of one arrival time are merged
(they expire together), so a series holds at most one entry per micro-batch within the hold.
"""

from __future__ import annotations

import heapq
import itertools
from collections import deque
from collections.abc import Hashable, Sequence
from typing import Generic, TypeVar

#: One window's held values: the max, then each quantile (None where the window is too small
#: for it).
Values = tuple[int | None, ...]
#: What a peak is held for (the exporter: a resolution and a series).
K = TypeVar("K", bound=Hashable)


def largest(rows: Sequence[Values]) -> Values:
    """Element-wise largest of ``rows``, ignoring None (None where every row has None)."""
    out: list[int | None] = list(rows[0])
    for row in rows[1:]:
        for i, v in enumerate(row):
            best = out[i]
            if v is not None and (best is None or v > best):
                out[i] = v
    return tuple(out)


class PeakHold(Generic[K]):
    """Per key, the values that arrived within ``hold_s``; ``expire`` says whose peak fell."""

    def __init__(self, hold_s: float) -> None:
        self.hold_s = hold_s
        self._held: dict[K, deque[tuple[float, Values]]] = {}
        #: (when a key's oldest entry expires, tie-break, key)
        self._due: list[tuple[float, int, K]] = []
        self._ties = itertools.count()

    def hold(self, key: K, values: Values, now: float) -> None:
        """Hold one window's values from ``now``."""
        held = self._held.setdefault(key, deque())
        if held and held[-1][0] == now:
            held[-1] = (now, largest([held[-1][1], values]))
            return
        held.append((now, values))
        if len(held) == 1:
            heapq.heappush(self._due, (now + self.hold_s, next(self._ties), key))

    def peak(self, key: K) -> Values | None:
        """The element-wise largest of the key's held values (None: nothing held)."""
        held = self._held.get(key)
        return largest([v for _, v in held]) if held else None

    def expire(self, now: float) -> set[K]:
        """Let go of entries held for ``hold_s``; the keys that lost one."""
        fell: set[K] = set()
        while self._due and self._due[0][0] <= now:
            due, _, key = heapq.heappop(self._due)
            held = self._held.get(key)
            if not held or held[0][0] + self.hold_s != due:
                continue  # the key was dropped (and maybe held anew) since
            while held and held[0][0] + self.hold_s <= now:
                held.popleft()
            if held:
                heapq.heappush(self._due, (held[0][0] + self.hold_s, next(self._ties), key))
            else:
                del self._held[key]
            fell.add(key)
        return fell

    def drop(self, key: K) -> None:
        """Forget a key (its series left)."""
        self._held.pop(key, None)
