"""Closed windows: the unit handed from the streaming job to the exporter, archive and reports."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any, Protocol, TypeVar, cast

from core.hdr import SparseHistogram
from core.units import format_duration, parse_duration_s

#: Latency kinds, in the order they are displayed.
KINDS = ("e2e", "publish", "send_lag", "hiccup")
#: The ``partition`` label of a per-topic merge of all partitions.
ALL_PARTITIONS = "all"
#: The ``broker`` of an echo whose probe knew no leader for its partition when it sent.
UNKNOWN_BROKER = "unknown"


class _Arithmetic(Protocol):
    def __add__(self, other: Any) -> Any: ...
    def __sub__(self, other: Any) -> Any: ...
    def __mod__(self, other: Any) -> Any: ...


#: An int, a numpy array, or a Spark ``Column``: the window rule is written once for all three.
T = TypeVar("T", bound=_Arithmetic)


def window_start_us(t_us: T, span_us: Any) -> T:
    """Start of the window of span ``span_us`` holding ``t_us`` (event times are >= 0).

    Plain ``-`` and ``%`` only, so the Arrow path (numpy) and the Spark path (column expressions)
    call this same function and cannot disagree on which window a record belongs to.
    """
    return cast(T, t_us - t_us % span_us)


def window_end_us(t_us: T, span_us: Any) -> T:
    """End (exclusive) of the window of span ``span_us`` holding ``t_us``."""
    return cast(T, window_start_us(t_us, span_us) + span_us)


@dataclass(frozen=True)
class WindowSpec:
    """The resolutions the stream job keeps: whole seconds, each a multiple of the finest.

    Parsed once from ``--windows``/``windows:`` and handed as this object to the source, the
    query, the exporter, the report and the SLA defaults; ``to_option`` carries it through Spark.
    """

    seconds: tuple[int, ...] = (10, 60, 3600)

    def __post_init__(self) -> None:
        seconds = sorted(set(self.seconds))
        if not seconds:
            raise ValueError("need at least one window")
        finest = seconds[0]
        if finest < 1 or not float(finest).is_integer():
            raise ValueError("windows must be whole seconds, at least 1s")
        for s in seconds:
            if s % finest:
                raise ValueError(f"every window must be a multiple of the finest ({finest:g}s)")
        object.__setattr__(self, "seconds", tuple(int(s) for s in seconds))

    @classmethod
    def from_names(cls, names: str | Iterable[str]) -> WindowSpec:
        """From names as users write them: ``"10s,1m,1h"`` or ``("1m", "10s")``."""
        items = names.split(",") if isinstance(names, str) else list(names)
        seconds = tuple(parse_duration_s(str(x).strip()) for x in items if str(x).strip())
        return cls(cast(tuple[int, ...], seconds))  # checked whole and made int in __post_init__

    @classmethod
    def from_option(cls, text: str) -> WindowSpec:
        """The spec back from its one Spark option string (``to_option``)."""
        return cls.from_names(text)

    def to_option(self) -> str:
        """The spec as one string option for Spark (read back by ``from_option``)."""
        return ",".join(self.names)

    @property
    def names(self) -> tuple[str, ...]:
        """Resolution labels, finest first: ``("10s", "1m", "1h")``."""
        return tuple(format_duration(s) for s in self.seconds)

    @property
    def resolutions_us(self) -> dict[str, int]:
        """Resolution label → span in microseconds, finest first."""
        return {format_duration(s): s * 1_000_000 for s in self.seconds}

    @property
    def finest(self) -> str:
        """Label of the finest resolution (the one late echoes and counters are judged on)."""
        return format_duration(self.seconds[0])

    @property
    def finest_us(self) -> int:
        """Span of the finest window in microseconds."""
        return self.seconds[0] * 1_000_000

    def span_us(self, resolution: str) -> int:
        """Span of one resolution in microseconds."""
        return self.resolutions_us[resolution]

    def window_start_us(self, t_us: T, resolution: str | None = None) -> T:
        """Start of the window of ``resolution`` (the finest by default) holding ``t_us``."""
        return window_start_us(t_us, self.span_us(resolution) if resolution else self.finest_us)

    def window_end_us(self, t_us: T, resolution: str | None = None) -> T:
        """End (exclusive) of the window of ``resolution`` (the finest by default)."""
        return window_end_us(t_us, self.span_us(resolution) if resolution else self.finest_us)


#: The resolutions a stream job keeps unless configured otherwise.
DEFAULT_WINDOWS = WindowSpec()


@dataclass(frozen=True)
class SeriesKey:
    """What a latency series is about.

    ``broker`` is the partition's leader at send time. Empty: a partition or topic series (and
    the probe's hiccups). With ``partition="all"``: a broker's merge of the partitions it led.
    With both set: a *cell* (one partition under one leader), the grain the stream job keeps so
    that ``with_rollups`` can build both; cells never leave the job.
    """

    cluster: str
    topic: str
    partition: str
    kind: str
    broker: str = ""

    @property
    def is_broker(self) -> bool:
        """A per-broker rollup (``nines_broker_*`` families)."""
        return bool(self.broker) and self.partition == ALL_PARTITIONS

    @property
    def is_cell(self) -> bool:
        """One partition under one send-time leader: input of ``with_rollups`` only."""
        return bool(self.broker) and self.partition != ALL_PARTITIONS


@dataclass(frozen=True)
class WindowHistogram:
    """The final histogram of one series over one closed event-time window."""

    resolution: str
    window_start_us: int
    window_end_us: int
    series: SeriesKey
    hist: SparseHistogram
    lost: int = 0

    @property
    def sort_key(self) -> tuple[str, int, str, str, str, str, str]:
        """Stable order: resolution, window start, then the series."""
        s = self.series
        return (
            self.resolution, self.window_start_us, s.cluster, s.topic, s.partition, s.kind,
            s.broker,
        )  # fmt: skip

    def merge(self, other: WindowHistogram) -> WindowHistogram:
        """Both windows' samples in one histogram; the window span covers both."""
        return replace(
            self,
            window_start_us=min(self.window_start_us, other.window_start_us),
            window_end_us=max(self.window_end_us, other.window_end_us),
            hist=self.hist.merge(other.hist),
            lost=self.lost + other.lost,
        )


def merge_all(windows: Iterable[WindowHistogram]) -> WindowHistogram:
    """Merge histograms (add bucket counts); never combine quantiles."""
    it = iter(windows)
    try:
        acc = next(it)
    except StopIteration:
        raise ValueError("nothing to merge") from None
    for w in it:
        acc = acc.merge(w)
    return acc


def with_topic_rollups(windows: Iterable[WindowHistogram]) -> list[WindowHistogram]:
    """The windows plus a ``partition="all"`` merge per resolution, window, topic and kind."""
    items = list(windows)
    groups: dict[tuple[str, int, str, str, str], list[WindowHistogram]] = {}
    for w in items:
        if w.series.partition == ALL_PARTITIONS or w.series.broker:
            continue
        key = (w.resolution, w.window_start_us, w.series.cluster, w.series.topic, w.series.kind)
        groups.setdefault(key, []).append(w)
    rollups = [
        replace(merge_all(group), series=replace(group[0].series, partition=ALL_PARTITIONS))
        for group in groups.values()
    ]
    return items + rollups


def with_rollups(windows: Iterable[WindowHistogram]) -> list[WindowHistogram]:
    """From cells (partition × send-time leader) to every series a closed window is exported as.

    Partition series merge their cells over leaders, so a leader move leaves one series per
    partition, exactly as without brokers; the topic's ``partition="all"`` merges those; each
    broker's ``partition="all", broker=…`` merges the cells it led, lost counts included, so a
    slow broker's tail stays on its own series when its partitions move. Histograms are merged
    (counts added), never quantiles. Windows that are not cells pass through as they are.
    """
    plain: list[WindowHistogram] = []
    cells: dict[tuple[str, int, SeriesKey], list[WindowHistogram]] = {}
    brokers: dict[tuple[str, int, SeriesKey], list[WindowHistogram]] = {}
    for w in windows:
        if not w.series.is_cell:
            plain.append(w)
            continue
        s = w.series
        cells.setdefault((w.resolution, w.window_start_us, replace(s, broker="")), []).append(w)
        of_broker = replace(s, partition=ALL_PARTITIONS)
        brokers.setdefault((w.resolution, w.window_start_us, of_broker), []).append(w)
    partitions = [replace(merge_all(g), series=k[2]) for k, g in cells.items()]
    by_broker = [replace(merge_all(g), series=k[2]) for k, g in brokers.items()]
    return with_topic_rollups(plain + partitions) + by_broker
