"""Counters of one micro-batch's closed windows: what was counted besides latency."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields

from core.windows import SeriesKey

TopicKey = tuple[str, str, str]  # cluster, topic, partition


def _add(a: Mapping[object, int], b: Mapping[object, int]) -> dict[object, int]:
    out = dict(a)
    for k, v in b.items():
        out[k] = out.get(k, 0) + v
    return out


@dataclass(frozen=True)
class StreamCounters:
    """Echoes, losses, late and bad records, overflow, vanished offsets and offsets that went
    back, by what they concern."""

    echoes: dict[TopicKey, int] = field(default_factory=dict)
    lost: dict[TopicKey, int] = field(default_factory=dict)
    late: dict[TopicKey, int] = field(default_factory=dict)
    overflow: dict[SeriesKey, int] = field(default_factory=dict)
    bad: dict[str, int] = field(default_factory=dict)
    data_loss: dict[tuple[str, str], int] = field(default_factory=dict)
    #: (topic, partition) → times its offsets went back (topic recreated or truncated)
    offsets_reset: dict[tuple[str, str], int] = field(default_factory=dict)
    #: (cluster, system) → echoes: which kind of broker each probed cluster is
    systems: dict[tuple[str, str], int] = field(default_factory=dict)

    def merge(self, other: StreamCounters) -> StreamCounters:
        """Both batches' counts added."""
        return StreamCounters(
            **{name: _add(getattr(self, name), getattr(other, name)) for name in COUNTER_FIELDS}  # type: ignore[arg-type]
        )

    #: HdrHistogram vocabulary: ``add`` merges.
    add = merge


#: The counters' names in declaration order: the one list whoever walks the counters uses.
COUNTER_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(StreamCounters))
