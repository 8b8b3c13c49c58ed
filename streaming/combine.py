"""The combiner: a reader's echoes as partial HDR histograms, before any row reaches Spark.

The reader groups its echoes with numpy and Arrow, first per (finest window, series, kind,
reason, bucket), then into one row per (finest window, series, kind, reason) carrying a whole
sparse histogram (``streaming.wire``: count per bucket, lost, max, sum) and the latest event
time. Only the finest resolution is read from echoes: Spark builds the coarser ones by merging
closed finest windows (``streaming.histograms``). Spark's state merges the histograms
(``HistogramMerge``, in the JVM), so the rows into Spark grow with windows × series × kinds ×
tasks, not with the distinct buckets; re-reading the same offsets gives the same histograms, so
exactly-once holds.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from core.echo import LATENCY_SPANS
from core.hdr import HdrLayout
from core.windows import WindowSpec, window_end_us
from streaming import grouping
from streaming.state_keys import (
    HIST_KEYS,
    KIND_CODES,
    NO_LEADER,
    PARTIAL_SCHEMA,
    PROBE_PARTITION,
    STAT_CODES,
    SUBJECT_FIELDS,
    UNKNOWN_LEADER,
)
from streaming.wire import encode

#: A bucket's group inside the reader, before the histograms are encoded.
GROUP_KEYS = (*HIST_KEYS, "bucket")
#: The reader's bucket rows: one per group, count, lost, max and sum.
BUCKET_SCHEMA = pa.schema(
    [
        ("window_end_us", pa.int64()),
        *SUBJECT_FIELDS,
        ("bucket", pa.int64()),
        ("n", pa.int64()),
        ("lost", pa.int64()),
        ("max_us", pa.int64()),
        ("sum_us", pa.int64()),
        ("event_us", pa.int64()),
    ]
)
#: One measured or counted value before grouping (``value_us`` is 0 for counted rows).
_SAMPLE_SCHEMA = pa.schema(
    [
        *SUBJECT_FIELDS,
        ("value_us", pa.int64()),
        ("lost", pa.int64()),
        ("n", pa.int64()),
        ("event_us", pa.int64()),
    ]
)
_AGGREGATES = [
    ("n", "sum"),
    ("lost", "sum"),
    ("max_us", "max"),
    ("sum_us", "sum"),
    ("event_us", "max"),
]


def combine(rows: pa.RecordBatch | pa.Table, windows: WindowSpec, layout: HdrLayout) -> pa.Table:
    """Bucket rows (``BUCKET_SCHEMA``) of marked source rows (``streaming.marks.SOURCE_SCHEMA``).

    Every kind, measured or counted (late, bad, data loss), goes to the finest windows only; the
    coarser resolutions are merged from them in Spark. Echoes, nearly every row, take a numpy
    path (``_echo_buckets``); the rest (hiccups, counted rows) the general one. Their kinds
    differ, so the two never share a group.
    """
    table = rows if isinstance(rows, pa.Table) else pa.Table.from_batches([rows])
    is_echo = pc.equal(table.column("rtype"), "echo")
    if pc.all(is_echo).as_py():
        return _echo_buckets(table, windows, layout)
    echoes = table.filter(is_echo)
    others = table.filter(pc.invert(pc.fill_null(is_echo, False)))
    general = _group(_finest(_samples(others), windows, layout))
    if echoes.num_rows == 0:
        return general
    return pa.concat_tables([_echo_buckets(echoes, windows, layout), general])


def _finest(samples: pa.Table, windows: WindowSpec, layout: HdrLayout) -> pa.Table:
    """Samples as ungrouped bucket rows of their finest window."""
    values = samples.column("value_us").to_numpy(zero_copy_only=False)
    n = samples.column("n").to_numpy(zero_copy_only=False)
    event = samples.column("event_us").to_numpy(zero_copy_only=False)
    return (
        samples.select(["cluster", "topic", "partition", "leader", "kind", "reason"])
        .add_column(0, "window_end_us", pa.array(window_end_us(event, windows.finest_us)))
        .append_column("bucket", pa.array(layout.index_of(values)))
        .append_column("n", samples.column("n"))
        .append_column("lost", samples.column("lost"))
        .append_column("max_us", samples.column("value_us"))
        .append_column("sum_us", pa.array(values * n))
        .append_column("event_us", samples.column("event_us"))
    )


#: The echo path's kinds, in order: the measured ones, then the per-system count.
_ECHO_KINDS = [*(KIND_CODES[k] for k in LATENCY_SPANS), STAT_CODES["system"]]


def _echo_buckets(echoes: pa.Table, windows: WindowSpec, layout: HdrLayout) -> pa.Table:
    """Bucket rows of echo rows only, grouped with numpy: one code per histogram (finest
    window, kind, subject) and bucket, counted into slots (``_dense_groups``), or past its bound
    sorted into one int64 key and ``reduceat``. The same rows as ``_samples`` then ``_group``,
    and several times faster: Arrow's hash group-by on eight columns, two of them strings, and
    the sample tables were most of a read task; counting halved what was left
    (``python -m bench.combiner``; docs/benchmarks.md, figures the code cites)."""
    rows = echoes.num_rows
    if rows == 0:
        return BUCKET_SCHEMA.empty_table()
    col = echoes.column

    def ints(name: str, fill: int = 0) -> np.ndarray:
        return np.asarray(pc.fill_null(col(name), fill).to_numpy(zero_copy_only=False), np.int64)

    def valid(name: str) -> np.ndarray:
        return np.asarray(pc.is_valid(col(name)).to_numpy(zero_copy_only=False))

    lost = np.asarray(pc.fill_null(col("lost"), False).to_numpy(zero_copy_only=False), bool)
    n, event = ints("n"), ints("event_us")
    window_end = window_end_us(event, windows.finest_us)
    leader = ints("leader", UNKNOWN_LEADER)
    kinds = len(_ECHO_KINDS)
    limit = grouping.dense_limit(rows * kinds)
    cluster, topic = grouping.codes(col("cluster")), grouping.codes(col("topic"))
    partition, leader_code = (
        grouping.column_codes(col("partition"), limit),
        grouping.int_codes(leader, limit),
    )
    system = grouping.codes(col("system"))
    window = grouping.int_codes(window_end // windows.finest_us, limit)
    measured_subject = grouping.key([cluster, topic, partition, leader_code])
    system_subject = grouping.key([cluster, topic, system])
    if measured_subject is None or system_subject is None:
        return _group(_finest(_samples(echoes), windows, layout))
    values, keep, lost_flags, subjects = [], [], [], []
    for span in LATENCY_SPANS.values():
        value = ints(span.end) - ints(span.start)
        ok = valid(span.end) & valid(span.start)
        flag = np.zeros(rows, np.int64)
        if span.if_lost is not None:
            value = np.where(lost, ints(span.if_lost), value)
            ok = np.where(lost, valid(span.if_lost), ok)
            flag = lost.astype(np.int64)
        values.append(value)
        keep.append(ok)
        lost_flags.append(flag)
        subjects.append(measured_subject[0])
    # the per-system count: one 0 µs value per echo, always kept, so the last ``rows`` elements
    values.append(np.zeros(rows, np.int64))
    keep.append(np.ones(rows, bool))
    lost_flags.append(np.zeros(rows, np.int64))
    subjects.append(system_subject[0])
    take = np.flatnonzero(np.concatenate(keep))
    kind_i, src = np.divmod(take, rows)
    value_all = np.concatenate(values)[take]
    measured = len(take) - rows
    bucket = np.empty(len(take), np.int64)
    bucket[:measured] = layout.index_of(value_all[:measured])
    bucket[measured:] = layout.index_of(np.zeros(1, np.int64))[0]
    subject_cards = max(measured_subject[1], system_subject[1])
    subject = np.concatenate(subjects)[take]
    weights = n[src]
    hist_cards = window[1] * kinds * subject_cards
    groups = None
    if hist_cards <= limit:  # one code per (finest window, kind, subject): a histogram
        hist = (window[0][src] * kinds + kind_i) * subject_cards + subject
        groups = _dense_groups(hist, hist_cards, bucket, limit)
    if groups is not None:
        of, count = groups.of, groups.groups
        at = np.empty(count, np.int64)
        at[of] = np.arange(len(of))  # any element of a group: all share its key
        group_bucket = groups.bucket
        unit = not np.any(n != 1)  # every row one echo (not a gap's count): count, not add
        bounds = np.searchsorted(take, np.arange(kinds + 1) * rows)  # each kind's elements
        lost_at = np.concatenate(
            [
                lo + np.flatnonzero(flag[src[lo:hi]])
                for flag, lo, hi in zip(lost_flags, bounds[:-1], bounds[1:], strict=True)
            ]
        )  # the few lost elements (e2e's), not every element's flag
        totals = [
            np.bincount(of, minlength=count) if unit else _add(of, count, weights),
            _add(of[lost_at], count, np.ones(len(lost_at), np.int64)),
            _most(of, count, value_all),
            _add(of, count, value_all if unit else value_all * weights),
            _most(of, count, event[src]),
        ]
    else:  # too many possible groups to count: sort
        radix = [window[1], kinds, subject_cards, int(bucket.max(initial=0)) + 1]
        if np.prod(np.asarray(radix, dtype=np.float64)) >= 2.0**62:
            return _group(_finest(_samples(echoes), windows, layout))
        key = window[0][src]
        key = key * kinds + kind_i
        key = key * subject_cards + subject
        key = key * radix[3] + bucket
        order, first = grouping.runs(key)
        lost_all = np.concatenate(lost_flags)[take]
        at = order[first]
        group_bucket = bucket[at]
        totals = [
            np.add.reduceat(weights[order], first),
            np.add.reduceat(lost_all[order], first),
            np.maximum.reduceat(value_all[order], first),
            np.add.reduceat((value_all * weights)[order], first),
            np.maximum.reduceat(event[src][order], first),
        ]
    group_src, group_kind = src[at], kind_i[at]
    is_system = group_kind == kinds - 1
    kind_codes = np.asarray(_ECHO_KINDS, np.int32)[group_kind]
    system_rows = pa.array(is_system)
    columns = {
        "window_end_us": pa.array(window_end[group_src]),
        "cluster": col("cluster").take(pa.array(group_src)),
        "topic": col("topic").take(pa.array(group_src)),
        "partition": pc.if_else(
            system_rows, pa.scalar(None, pa.int64()), col("partition").take(pa.array(group_src))
        ),
        "leader": pa.array(np.where(is_system, NO_LEADER, leader[group_src])),
        "kind": pa.array(kind_codes),
        "reason": pc.if_else(
            system_rows, col("system").take(pa.array(group_src)), pa.scalar(None, pa.string())
        ),
        "bucket": pa.array(group_bucket),
        **{name: pa.array(t) for (name, _), t in zip(_AGGREGATES, totals, strict=True)},
    }
    return pa.table([columns[f.name] for f in BUCKET_SCHEMA], schema=BUCKET_SCHEMA)


class _Groups(NamedTuple):
    """Groups of (histogram, bucket) pairs, numbered in (histogram, bucket) order."""

    of: np.ndarray  # each element's group
    groups: int
    hist: np.ndarray  # each group's histogram code
    bucket: np.ndarray  # each group's bucket


def _dense_groups(hist: np.ndarray, hists: int, bucket: np.ndarray, limit: int) -> _Groups | None:
    """``_Groups`` found by counting, not sorting: each histogram code gets one slot per bucket
    between its lowest and its highest, so the slots come out in (histogram, bucket) order (a
    sort of 800 k elements was a third of a read task). None past ``limit`` slots."""
    if hists > limit or len(hist) == 0:
        return None
    low = np.full(hists, np.iinfo(np.int64).max, np.int64)
    np.minimum.at(low, hist, bucket)
    high = np.full(hists, np.iinfo(np.int64).min, np.int64)
    np.maximum.at(high, hist, bucket)
    present = high >= low
    span = np.where(present, high.astype(np.float64) - low.astype(np.float64) + 1, 0.0)
    if span.sum() > limit:
        return None
    width = np.where(present, high - low + 1, 0)
    base = np.zeros(hists + 1, np.int64)
    np.cumsum(width, out=base[1:])
    slot = base[hist] + (bucket - low[hist])
    used = np.zeros(int(base[-1]), bool)
    used[slot] = True
    rank = np.cumsum(used, dtype=np.int32 if len(used) < 2**31 else np.int64)  # 5 bytes a slot
    used_slots = np.flatnonzero(used)
    group_hist = np.searchsorted(base, used_slots, side="right") - 1
    return _Groups(
        rank[slot] - 1, len(used_slots), group_hist, used_slots - base[group_hist] + low[group_hist]
    )


def _add(group: np.ndarray, count: int, values: np.ndarray) -> np.ndarray:
    out = np.zeros(count, np.int64)
    np.add.at(out, group, values)
    return out


def _most(group: np.ndarray, count: int, values: np.ndarray) -> np.ndarray:
    out = np.full(count, np.iinfo(np.int64).min, np.int64)
    np.maximum.at(out, group, values)
    return out


#: Marked rows a reader gathers before combining them: the more echoes per combine, the fewer
#: partials (a 10k-echo chunk made 4.3 partials per echo, a 100k-echo chunk 1.1, measured).
COMBINE_ROWS = 200_000
#: Partial rows a reader holds before handing them on: memory stays bounded whatever the batch.
MAX_PENDING_PARTIALS = 1_000_000


class Combiner:
    """A reader task's combiner: gathers marked rows, yields partials, within bounded memory."""

    def __init__(self, windows: WindowSpec, layout: HdrLayout) -> None:
        self.windows, self.layout = windows, layout
        self._rows: list[pa.RecordBatch] = []
        self._row_count = 0
        self._partials: list[pa.Table] = []
        self._partial_count = 0

    def add(self, marked: pa.RecordBatch) -> Iterator[pa.RecordBatch]:
        """Take marked rows; yields partials only when the pending ones reach the bound."""
        self._rows.append(marked)
        self._row_count += marked.num_rows
        if self._row_count >= COMBINE_ROWS:
            yield from self._combine_pending()

    def finish(self) -> Iterator[pa.RecordBatch]:
        """Everything still pending, merged, as histograms."""
        yield from self._combine_pending()
        if self._partials:
            merged = pa.concat_tables(self._partials)  # ``histograms`` adds them up
            yield from histograms(merged).to_batches()
        self._partials, self._partial_count = [], 0

    def _combine_pending(self) -> Iterator[pa.RecordBatch]:
        if self._rows:
            part = combine(pa.Table.from_batches(self._rows), self.windows, self.layout)
            self._rows, self._row_count = [], 0
            self._partials.append(part)
            self._partial_count += part.num_rows
        if self._partial_count >= MAX_PENDING_PARTIALS:
            merged = merge_partials(self._partials)
            self._partials, self._partial_count = [merged], merged.num_rows
            if merged.num_rows >= MAX_PENDING_PARTIALS // 2:  # little left to merge: hand on
                self._partials, self._partial_count = [], 0
                yield from histograms(merged).to_batches()


def merge_partials(partials: Sequence[pa.Table]) -> pa.Table:
    """Bucket rows of the same groups added up (sum, max): what Spark's state does, done early."""
    if not partials:
        return BUCKET_SCHEMA.empty_table()
    return _group(pa.concat_tables(partials))


def histograms(buckets: pa.Table) -> pa.Table:
    """Bucket rows as one encoded histogram per ``HIST_KEYS`` (``PARTIAL_SCHEMA``); a bucket may
    come several times in a key (the chunks' bucket rows, concatenated): its counts are added.
    Grouped by counting (``_dense_groups``), which yields the buckets in order: no sort."""
    rows = buckets.num_rows
    limit = grouping.dense_limit(rows)
    nulls = any(buckets.column(c).null_count for c in ("bucket", *(c for c, _ in _AGGREGATES)))
    key = None
    if rows and not nulls:
        key = grouping.key([grouping.column_codes(buckets.column(k), limit) for k in HIST_KEYS])
    bucket = _int64(buckets, "bucket")
    groups = _dense_groups(key[0], key[1], bucket, limit) if key is not None else None
    if key is None or groups is None:
        return _sorted_histograms(_group(buckets))
    hist, hists = key
    at = np.empty(hists, np.int64)
    at[hist] = np.arange(rows)  # any row of a histogram: all share its key
    offsets = np.zeros(hists + 1, np.int64)
    np.cumsum(np.bincount(groups.hist, minlength=hists), out=offsets[1:])
    encoded = encode(
        _add(hist, hists, _int64(buckets, "lost")),
        _most(hist, hists, _int64(buckets, "max_us")),
        _add(hist, hists, _int64(buckets, "sum_us")),
        offsets,
        groups.bucket,
        _add(groups.of, groups.groups, _int64(buckets, "n")),
    )
    out = buckets.select(list(HIST_KEYS)).take(pa.array(at))
    out = out.append_column("hist", encoded)
    out = out.append_column("event_us", pa.array(_most(hist, hists, _int64(buckets, "event_us"))))
    return out.cast(PARTIAL_SCHEMA)


def _sorted_histograms(buckets: pa.Table) -> pa.Table:
    """``histograms`` of grouped bucket rows (no bucket twice in a key) by sorting."""
    key = (
        grouping.radix([grouping.codes(buckets.column(k)) for k in HIST_KEYS])
        if buckets.num_rows
        else None
    )
    if key is None:
        return _arrow_histograms(buckets)
    bucket = _int64(buckets, "bucket")
    order = np.lexsort((bucket, key[0]))
    sorted_key = key[0][order]
    first = np.flatnonzero(np.concatenate(([True], sorted_key[1:] != sorted_key[:-1])))
    offsets = np.concatenate((first, [len(order)]))

    def total(name: str) -> np.ndarray:
        return np.add.reduceat(_int64(buckets, name)[order], first)

    def most(name: str) -> np.ndarray:
        return np.maximum.reduceat(_int64(buckets, name)[order], first)

    hist = encode(
        total("lost"),
        most("max_us"),
        total("sum_us"),
        offsets,
        bucket[order],
        _int64(buckets, "n")[order],
    )
    out = buckets.select(list(HIST_KEYS)).take(pa.array(order[first]))
    out = out.append_column("hist", hist).append_column("event_us", pa.array(most("event_us")))
    return out.cast(PARTIAL_SCHEMA)


def _int64(table: pa.Table, name: str) -> np.ndarray:
    return np.asarray(table.column(name).to_numpy(zero_copy_only=False), np.int64)


def _arrow_histograms(buckets: pa.Table) -> pa.Table:
    """``histograms`` through Arrow's group-by (empty input, or keys too many for one int64)."""
    g = buckets.group_by(list(HIST_KEYS), use_threads=False).aggregate(
        [
            ("bucket", "list"),
            ("n", "list"),
            ("lost", "sum"),
            ("max_us", "max"),
            ("sum_us", "sum"),
            ("event_us", "max"),
        ]
    )
    index = g["bucket_list"].combine_chunks()
    counts = g["n_list"].combine_chunks()
    offsets = index.offsets.to_numpy().astype(np.int64)
    idx = index.values.to_numpy(zero_copy_only=False)[offsets[0] : offsets[-1]]
    cnt = counts.values.to_numpy(zero_copy_only=False)[offsets[0] : offsets[-1]]
    group = np.repeat(np.arange(g.num_rows), np.diff(offsets))
    order = np.lexsort((idx, group))  # ascending buckets within each histogram
    hist = encode(
        g["lost_sum"].to_numpy(),
        g["max_us_max"].to_numpy(),
        g["sum_us_sum"].to_numpy(),
        offsets - offsets[0],
        idx[order],
        cnt[order],
    )
    out = g.select(list(HIST_KEYS)).append_column("hist", hist)
    out = out.append_column("event_us", g["event_us_max"])
    return out.cast(PARTIAL_SCHEMA)


def _group(table: pa.Table) -> pa.Table:
    """One row per group key, counts summed and maxima kept (numpy: one int64 key, a sort)."""
    if table.num_rows == 0:
        return _arrow_group(table)
    key = grouping.radix([grouping.codes(table.column(k)) for k in GROUP_KEYS])
    if key is None or any(table.column(c).null_count for c, _ in _AGGREGATES):
        return _arrow_group(table)
    order, first = grouping.runs(key[0])
    out = table.select(list(GROUP_KEYS)).take(pa.array(order[first]))
    for name, fn in _AGGREGATES:
        reduce = np.add if fn == "sum" else np.maximum
        out = out.append_column(name, pa.array(reduce.reduceat(_int64(table, name)[order], first)))
    return out.select(BUCKET_SCHEMA.names).cast(BUCKET_SCHEMA)


def _arrow_group(table: pa.Table) -> pa.Table:
    """``_group`` through Arrow's group-by (empty input, nulls, or too many keys for an int64)."""
    out = table.group_by(list(GROUP_KEYS), use_threads=False).aggregate(_AGGREGATES)
    names = {f"{col}_{fn}": col for col, fn in _AGGREGATES}
    out = out.rename_columns([names.get(c, c) for c in out.column_names])
    return out.select(BUCKET_SCHEMA.names).cast(BUCKET_SCHEMA)


def _samples(t: pa.Table) -> pa.Table:
    """One row per (record, kind): the measured latencies, the hiccups and the counted rows."""
    rtype = t.column("rtype")
    parts = []
    echoes = t.filter(pc.equal(rtype, "echo"))
    lost = pc.fill_null(echoes.column("lost"), False)
    # the send-time leader splits a partition's state only when it moves within a window
    leader = pc.fill_null(echoes.column("leader"), UNKNOWN_LEADER)
    for kind, span in LATENCY_SPANS.items():
        value = pc.subtract(echoes.column(span.end), echoes.column(span.start))
        lost_flag = pa.array(np.zeros(echoes.num_rows, np.int64))
        if span.if_lost is not None:
            # a lost message is never received: its latency is at least the loss timeout
            value = pc.if_else(lost, echoes.column(span.if_lost), value)
            lost_flag = pc.cast(lost, pa.int64())
        parts.append(
            _sample(echoes, kind=KIND_CODES[kind], value=value, lost=lost_flag, leader=leader)
        )
    parts.append(
        _sample(
            echoes,
            kind=STAT_CODES["system"],
            value=pa.array(np.zeros(echoes.num_rows, np.int64)),
            partition=pa.nulls(echoes.num_rows, pa.int64()),
            reason=echoes.column("system"),
        )
    )
    hiccups = t.filter(pc.equal(rtype, "hiccup"))
    parts.append(
        _sample(
            hiccups,
            kind=KIND_CODES["hiccup"],
            value=hiccups.column("max_us"),
            partition=pa.array(np.full(hiccups.num_rows, PROBE_PARTITION, np.int64)),
        )
    )
    for stat in ("late", "bad", "data_loss", "offsets_reset"):
        code = STAT_CODES[stat]
        counted = t.filter(pc.equal(rtype, stat))
        partition = counted.column("partition")
        if stat == "late":  # a late hiccup has no partition: it is the probe's, label "all"
            partition = pc.fill_null(partition, PROBE_PARTITION)
        parts.append(
            _sample(
                counted,
                kind=code,
                value=pa.array(np.zeros(counted.num_rows, np.int64)),
                partition=partition,
                reason=counted.column("reason"),
            )
        )
    samples = pa.concat_tables(parts)
    return samples.filter(pc.is_valid(samples.column("value_us")))


def _sample(
    t: pa.Table,
    *,
    kind: int,
    value: pa.Array | pa.ChunkedArray,
    lost: pa.Array | pa.ChunkedArray | None = None,
    partition: pa.Array | pa.ChunkedArray | None = None,
    reason: pa.Array | pa.ChunkedArray | None = None,
    leader: pa.Array | pa.ChunkedArray | None = None,
) -> pa.Table:
    rows = t.num_rows
    zeros = pa.array(np.zeros(rows, np.int64))
    return pa.table(
        [
            t.column("cluster"),
            t.column("topic"),
            t.column("partition") if partition is None else partition,
            pa.array(np.full(rows, NO_LEADER, np.int64)) if leader is None else leader,
            pa.array(np.full(rows, kind, np.int32)),
            pa.nulls(rows, pa.string()) if reason is None else reason,
            value,
            zeros if lost is None else lost,
            t.column("n"),
            t.column("event_us"),
        ],
        schema=_SAMPLE_SCHEMA,
    )
