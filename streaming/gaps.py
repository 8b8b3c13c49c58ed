"""Gap accounting: every offset of a read range is either read or counted, never skipped silently.

Offsets vanish under a reader when retention removes them first: the consumer then restarts at
the oldest retained record (``auto.offset.reset``), or nothing arrives and the low watermark has
moved past us. Either way the missing offsets become one counted ``data_loss`` row, like Spark's
``failOnDataLoss=false`` but never silent. Pure: the consume loop (``streaming.consume``) feeds it.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from streaming.marks import SOURCE_SCHEMA


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
    """Where a read stands in each of its ranges: the next offset wanted, and the ranges open."""

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


def data_loss_row(topic: str, gap: Gap, watermark_us: int) -> pa.RecordBatch:
    """The counted row of a gap, at the batch's watermark (its offsets have no event time)."""
    row = {
        "rtype": "data_loss",
        "topic": topic,
        "partition": gap.partition,
        "event_us": watermark_us,
        "n": gap.offsets,
    }
    return pa.RecordBatch.from_pylist([row], schema=SOURCE_SCHEMA)
