"""From the aggregation's rows (as Spark hands them over in Arrow) to histograms and counters."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pyarrow as pa

from core.hdr import HdrLayout, SparseHistogram
from core.windows import SeriesKey, WindowSpec, merge_all, with_rollups, with_topic_rollups
from streaming.closed import closed_windows
from streaming.wire import encode

LAYOUT = HdrLayout()
SPEC = WindowSpec.from_names("10s,1m")
RES = SPEC.resolutions_us
T0 = 1_800_000_000_000_000 - 1_800_000_000_000_000 % 60_000_000
SCHEMA = pa.schema(
    [
        ("resolution", pa.string()),
        ("window_end", pa.timestamp("us", "UTC")),
        ("cluster", pa.string()),
        ("topic", pa.string()),
        ("partition", pa.string()),
        ("kind", pa.string()),
        ("hist", pa.binary()),
    ]
)


def encoded(values: list[int], lost: int = 0) -> bytes:
    """One histogram as ``streaming.wire`` encodes it (and the JVM merge keeps it)."""
    buckets, counts = np.unique(LAYOUT.index_of(values), return_counts=True)
    hist = encode([lost], [max(values)], [sum(values)], [0, len(buckets)], buckets, counts)
    return bytes(hist[0].as_py())


def aggregate(samples: list[tuple[int, str, int, bool]]) -> list[dict[str, object]]:
    """What Spark's groupBy emits: one histogram per (resolution, window, series, kind)."""
    groups: dict[tuple[str, int, str], list[tuple[int, bool]]] = {}
    for event_us, partition, value, lost in samples:
        for res, span in RES.items():
            end = event_us - event_us % span + span
            groups.setdefault((res, end, partition), []).append((value, lost))
    return [
        {
            "resolution": res,
            "window_end": datetime.fromtimestamp(end / 1e6, UTC),
            "cluster": "c",
            "topic": "t",
            "partition": partition,
            "kind": "e2e",
            "hist": encoded([v for v, _ in vs], sum(lost for _, lost in vs)),
        }
        for (res, end, partition), vs in groups.items()
    ]


def stat(kind: str, count: int, partition: str = "0", topic: str = "t") -> dict[str, object]:
    return {
        "resolution": "10s",
        "window_end": datetime.fromtimestamp(T0 / 1e6 + 10, UTC),
        "cluster": "c",
        "topic": topic,
        "partition": partition,
        "kind": kind,
        "hist": encoded([0] * count),
    }


def test_histograms_counters_and_merges_are_exact() -> None:
    rng = np.random.default_rng(3)
    samples = [
        (
            T0 + int(rng.integers(0, 60_000_000)),
            str(int(rng.integers(0, 3))),
            int(rng.lognormal(8, 1.5)) + 1,
            bool(rng.random() < 0.01),
        )
        for _ in range(3000)
    ]
    samples.append((T0 + 1, "1", 7_200_000_000, False))  # above highest: overflow, counted
    rows = aggregate(samples)
    rng.shuffle(rows)  # type: ignore[arg-type]
    rows += [stat("stat:late", 4), stat("stat:bad:not_json", 2), stat("stat:bad:order", 1)]
    rows += [stat("stat:data_loss", 17, partition="1", topic="nines.echoes")]
    rows += [stat("stat:system:nats", 9, partition=""), stat("stat:system:nats", 3, partition="")]
    windows, counters = closed_windows(pa.Table.from_pylist(rows, SCHEMA), LAYOUT, SPEC)

    assert counters.late == {("c", "t", "0"): 4}
    assert counters.bad == {"not_json": 2, "order": 1}
    assert counters.data_loss == {("nines.echoes", "1"): 17}
    assert counters.systems == {("c", "nats"): 12}
    assert sum(counters.echoes.values()) == len(samples)
    assert counters.lost == {
        ("c", "t", p): sum(1 for _, q, _, lost in samples if lost and q == p) for p in "012"
    }
    assert sum(counters.overflow.values()) == 1

    for w in windows:
        mine = [
            (v, lost)
            for t, p, v, lost in samples
            if p == w.series.partition and w.window_start_us <= t < w.window_end_us
        ]
        ref = SparseHistogram.from_values(LAYOUT, [v for v, _ in mine])
        assert np.array_equal(w.hist.index, ref.index) and np.array_equal(w.hist.count, ref.count)
        assert (w.hist.max_us, w.hist.sum_us) == (ref.max_us, ref.sum_us)
        assert w.lost == sum(lost for _, lost in mine)
        assert w.window_end_us - w.window_start_us == RES[w.resolution]

    # the minute is the merge of its six 10-second windows, bucket for bucket
    for p in "012":
        minute = next(w for w in windows if w.resolution == "1m" and w.series.partition == p)
        tens = [w for w in windows if w.resolution == "10s" and w.series.partition == p]
        merged = merge_all(tens)
        assert np.array_equal(merged.hist.index, minute.hist.index)
        assert np.array_equal(merged.hist.count, minute.hist.count)
    everything = [w for w in with_topic_rollups(windows) if w.series.partition == "all"]
    assert sum(w.hist.total for w in everything if w.resolution == "1m") == len(samples)


def test_empty_batch() -> None:
    windows, counters = closed_windows(SCHEMA.empty_table(), LAYOUT, SPEC)
    assert windows == [] and not counters.echoes and not counters.bad


def test_overflow_adds_up_over_several_windows_of_one_series_in_one_batch() -> None:
    """A batch that closes several finest windows of a series counts each one's overflow."""
    samples = [(T0 + 1, "1", 7_200_000_000, False), (T0 + 10_000_001, "1", 7_300_000_000, False)]
    samples += [(T0 + 20_000_001, "1", 7_400_000_000, False), (T0 + 5, "1", 900, False)]
    windows, counters = closed_windows(
        pa.Table.from_pylist(aggregate(samples), SCHEMA), LAYOUT, SPEC
    )
    assert len({w.window_start_us for w in windows if w.resolution == "10s"}) == 3
    assert counters.overflow == {next(iter(counters.overflow)): 3}


def test_rows_with_leaders_become_cells_that_roll_up_to_the_same_partition_series() -> None:
    rng = np.random.default_rng(5)
    samples = [
        (T0 + int(rng.integers(0, 60_000_000)), str(int(rng.integers(0, 2))),
         int(rng.lognormal(8, 1.5)) + 1, bool(rng.random() < 0.02))
        for _ in range(2000)
    ]  # fmt: skip
    samples.append((T0 + 2, "0", 7_200_000_000, False))  # overflow: counted per partition series
    # partition 0 is led by broker 1 for the first 25 s, then by broker 3; partition 1 by 2
    leader = lambda t, p: "2" if p == "1" else ("1" if t < T0 + 25_000_000 else "3")  # noqa: E731
    with_broker: list[dict[str, object]] = []
    for b in "123":
        mine = [s for s in samples if leader(s[0], s[1]) == b]
        with_broker += [{**r, "broker": b} for r in aggregate(mine)]
    plain, _ = closed_windows(pa.Table.from_pylist(aggregate(samples), SCHEMA), LAYOUT, SPEC)
    table = pa.Table.from_pylist(with_broker, SCHEMA.append(pa.field("broker", pa.string())))
    cells, counters = closed_windows(table, LAYOUT, SPEC)

    assert all(w.series.is_cell for w in cells)
    assert {w.series.broker for w in cells if w.series.partition == "0"} == {"1", "3"}
    assert counters.overflow == {SeriesKey("c", "t", "0", "e2e"): 1}
    assert sum(counters.echoes.values()) == len(samples)
    rolled = with_rollups(cells)
    expect = with_topic_rollups(plain)
    key = lambda w: w.sort_key  # noqa: E731
    parts = sorted((w for w in rolled if not w.series.broker), key=key)
    assert [w.sort_key for w in parts] == [w.sort_key for w in sorted(expect, key=key)]
    for a, b in zip(parts, sorted(expect, key=key), strict=True):
        assert np.array_equal(a.hist.index, b.hist.index)
        assert np.array_equal(a.hist.count, b.hist.count)
        assert (a.hist.max_us, a.hist.sum_us, a.lost) == (b.hist.max_us, b.hist.sum_us, b.lost)
    for w in rolled:
        if not w.series.is_broker:
            continue
        mine = [
            (v, lost)
            for t, p, v, lost in samples
            if leader(t, p) == w.series.broker and w.window_start_us <= t < w.window_end_us
        ]
        ref = SparseHistogram.from_values(LAYOUT, [v for v, _ in mine])
        assert np.array_equal(w.hist.count, ref.count) and w.hist.max_us == ref.max_us
        assert w.lost == sum(lost for _, lost in mine)
    minute = {w.series.broker: w for w in rolled if w.series.is_broker and w.resolution == "1m"}
    assert set(minute) == {"1", "2", "3"}
    assert sum(w.hist.total for w in minute.values()) == len(samples)
