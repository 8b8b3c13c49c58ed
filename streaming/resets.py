"""Offsets that went backwards: an echo topic deleted and recreated, or truncated, under the job.

Spark keeps each partition's next offset. A topic deleted and recreated starts again at offset 0
with a new topic id; a log truncated by an unclean leader election ends below offsets already
read. Either way Spark's offset is past the log's end: the job would wait there and skip the new
records below it, silently. ``plan`` finds it when ``latestOffset`` plans a batch, from what the
cluster says then; the batch's end offsets carry the decision (``RESETS``: partition → the offset
reading resumes at), so ``partitions`` and every replay read it from Spark's offset log, and the
reset is counted once, by the batch that carries it.

* **Recreated** (the topic id changed, or the log ended below our offset and the cluster gives no
  topic ids): the partition is read again from offset 0 of the new log; offsets retention already
  removed there are counted as a gap, as anywhere.
* **Truncated** (the same topic id, the log's end below our offset): reading resumes at the new
  end. Reading from the start would count again every echo read already; the records the new
  leader wrote below our old offset before this was seen are not read.

Pure: the source (``streaming.source``) asks the cluster and logs the line.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

#: The offset dict's key holding the topic's id (the other keys are partition numbers).
TOPIC_ID = "topic_id"
#: The end offsets' key holding the batch's resets: partition → the offset reading resumes at.
RESETS = "reset"
#: Partitions the line names at most.
LINE_PARTITIONS = 8


def _is_offsets(value: object) -> bool:
    return isinstance(value, dict) and all(
        isinstance(k, str) and k.isdigit() and isinstance(v, int) and not isinstance(v, bool)
        for k, v in value.items()
    )


def is_offset(offset: object) -> bool:
    """Whether a source offset is the nines-kafka source's: partition → next offset, and maybe
    the topic's id and the batch's resets (what ``streaming.checkpoint`` accepts)."""
    if not isinstance(offset, dict):
        return False
    rest = {k: v for k, v in offset.items() if k not in (TOPIC_ID, RESETS)}
    return (
        _is_offsets(rest)
        and isinstance(offset.get(TOPIC_ID, ""), str)
        and _is_offsets(offset.get(RESETS, {}))
    )


def partition_offsets(offsets: dict[str, Any]) -> dict[str, int]:
    """Spark's offset dict without the keys that are not partitions."""
    return {p: int(o) for p, o in offsets.items() if p.isdigit()}


@dataclass(frozen=True)
class OffsetsReset:
    """A partition whose offsets went back: Spark's next ``old`` offset, the log's ``end`` now,
    and the offset reading ``resume``s at."""

    partition: str
    old: int
    end: int
    resume: int


@dataclass(frozen=True)
class ResetPlan:
    """What ``plan`` found: the resets, and the topic's id before and now (None: unknown)."""

    resets: list[OffsetsReset]
    old_id: str | None
    new_id: str | None

    @property
    def recreated(self) -> bool:
        """The topic id changed: the topic was deleted and created again."""
        return self.old_id is not None and self.new_id is not None and self.old_id != self.new_id

    @property
    def truncated(self) -> bool:
        """The same topic id, its log shorter: truncated (an unclean leader election)."""
        return self.old_id is not None and self.old_id == self.new_id

    def line(self, topic: str) -> str:
        """The one line that says it: topic, partitions, old and new offsets, likely cause."""
        shown = ", ".join(
            f"[{r.partition}] {r.old} -> {r.end}" for r in self.resets[:LINE_PARTITIONS]
        )
        more = len(self.resets) - LINE_PARTITIONS
        if more > 0:
            shown += f" and {more} more"
        if self.recreated:
            cause = f"the topic was deleted and recreated (topic id {self.old_id} -> {self.new_id})"
            then = "reading each again from offset 0"
        elif self.truncated:
            cause = "the log was truncated under the same topic id (an unclean leader election?)"
            then = "reading on from the new end (records rewritten below the old offset are lost)"
        else:
            cause = (
                "the topic was deleted and recreated, or truncated by an unclean leader election"
            )
            then = "reading each again from offset 0"
        return (
            f"echo topic {topic!r}: offsets went back (offset read -> log end now) in partition "
            f"{shown}: {cause}; {then}; counted in nines_offsets_reset_total"
        )


def plan(start: dict[str, Any], ends: dict[str, int], topic_id: str | None) -> ResetPlan:
    """The partitions of ``start`` (Spark's offsets) whose offsets went back, given the log
    ``ends`` and the topic's id now (None: the cluster gives none, or did not answer)."""
    old_id = start.get(TOPIC_ID)
    offsets = partition_offsets(start)
    found = ResetPlan([], old_id, topic_id)
    resets = []
    for p in sorted(ends, key=int):
        old = offsets.get(p)
        if old is None or old == 0:
            continue  # a partition new to us, or never written: read from 0 as it is
        if found.recreated:
            resets.append(OffsetsReset(p, old, ends[p], 0))
        elif ends[p] < old:
            resets.append(OffsetsReset(p, old, ends[p], ends[p] if found.truncated else 0))
    return ResetPlan(resets, old_id, topic_id)


def read_from(start: dict[str, Any], end: dict[str, Any]) -> dict[str, int]:
    """Where a batch reads each partition of ``end`` from: Spark's start offset, or where the
    batch's resets (logged in ``end``) resume."""
    offsets = partition_offsets(start)
    resets = {p: int(o) for p, o in end.get(RESETS, {}).items()}
    return {p: resets.get(p, offsets.get(p, 0)) for p in partition_offsets(end)}


def reset_partitions(end: dict[str, Any]) -> set[int]:
    """The partitions whose reset this batch counts (logged in its ``end``)."""
    return {int(p) for p in end.get(RESETS, {})}
