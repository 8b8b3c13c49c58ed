"""Gap accounting: every offset of a read range is either read or counted, never skipped silently.

Offsets vanish under a reader when retention removes them first: the consumer then restarts at
the oldest retained record (``auto.offset.reset``), or nothing arrives and the low watermark has
moved past us. Either way the missing offsets become one ``Gap``, which the source counts as a
``data_loss`` row (``streaming.marks``), like Spark's ``failOnDataLoss=false`` but never silent.
Pure: the consume loop (``streaming.consume``) feeds it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class KafkaRange:
    """One Kafka partition's offsets [start, end) for one micro-batch."""

    partition: int
    start: int
    end: int


@dataclass(frozen=True)
class Gap:
    """``offsets`` offsets of ``partition`` that vanished before they were read."""

    partition: int
    offsets: int


class RangeBook:
    """Where a read stands in each of its ranges: the next offset wanted, and the ranges open.

    Invariant: a range is open exactly while its offset is below its end. Every method keeps it
    (``next_record`` relies on it).
    """

    def __init__(self, ranges: list[KafkaRange]) -> None:
        self.offset = {r.partition: r.start for r in ranges}
        self.end = {r.partition: r.end for r in ranges}
        self.open = {r.partition for r in ranges if r.end > r.start}

    def pending(self) -> int:
        """Offsets still to read over the open ranges."""
        return sum(self.end[p] - self.offset[p] for p in self.open)

    def wants(self, partition: int, offset: int) -> bool:
        """Whether a record at ``offset`` is new to the read (not done, not read already)."""
        return partition in self.open and offset >= self.offset[partition]

    def next_record(self, partition: int, offset: int) -> bool:
        """Book the record at ``offset`` if it is the next of its range and not the range's last;
        False for any other (the caller then asks ``wants`` and ``arrive``).

        The consume loop's path for nearly every record (a v1 echo is one message), so it is one
        lookup and one store: it leaves ``open`` alone, which the invariant allows, since the
        offset it stores stays below the end (the range was open, and stays so). As a method it
        costs a small fraction of what it saves over ``wants`` and ``arrive`` (``bench.consume``;
        docs/benchmarks.md, figures the code cites).
        """
        if offset == self.offset.get(partition) and offset + 1 < self.end[partition]:
            self.offset[partition] = offset + 1
            return True
        return False

    def arrive(self, partition: int, offset: int) -> tuple[Gap | None, bool]:
        """A wanted record arrived: the gap before it, and whether it lies inside the range."""
        gap = self.skip_to(partition, offset)
        inside = offset < self.end[partition]
        if inside:
            self.offset[partition] = offset + 1
            self._close_if_done(partition)
        return gap, inside

    def skip_to(self, partition: int, offset: int) -> Gap | None:
        """Nothing below ``offset`` exists any more: count what was still wanted as a gap."""
        new = min(offset, self.end[partition])
        if new <= self.offset[partition]:
            return None
        gap = Gap(partition, new - self.offset[partition])
        self.offset[partition] = new
        self._close_if_done(partition)
        return gap

    def _close_if_done(self, partition: int) -> None:
        if self.offset[partition] >= self.end[partition]:
            self.open.discard(partition)
