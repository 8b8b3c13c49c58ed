"""The combiner's partials equal a row-by-row reference, however the rows are chunked."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.echo import LATENCY_SPANS, SYSTEMS
from core.hdr import HdrLayout
from core.windows import WindowSpec
from streaming import combine as combine_mod
from streaming import grouping
from streaming.combine import BUCKET_SCHEMA, Combiner, combine
from streaming.marks import SOURCE_SCHEMA, mark_late
from streaming.state_keys import HIST_KEYS, KIND_CODES, PARTIAL_SCHEMA, STAT_CODES
from streaming.wire import decode

T0 = 1_800_000_000_000_000 - 1_800_000_000_000_000 % 3_600_000_000
SPEC = WindowSpec.from_names("10s,1m,1h")
LAYOUT = HdrLayout(digits=2)

maybe_us = st.none() | st.integers(0, 5_000_000)
#: The max of no values yet (a latency can be negative: a clock stepped back).
LEAST = -(2**63)


@st.composite
def source_row(draw: Any) -> dict[str, Any]:
    rtype = draw(st.sampled_from(["echo", "echo", "echo", "hiccup", "late", "bad", "data_loss"]))
    intended = T0 + draw(st.integers(0, 2 * 3_600_000_000))
    row: dict[str, Any] = {
        "rtype": rtype,
        "reason": draw(st.sampled_from(["not_json", "future"])) if rtype == "bad" else None,
        "cluster": draw(st.sampled_from(["a", "b"])) if rtype != "bad" else None,
        "topic": draw(st.sampled_from(["t1", "t2"])) if rtype != "bad" else None,
        "partition": draw(st.integers(0, 3)) if rtype in ("echo", "data_loss") else None,
        "leader": draw(st.none() | st.integers(-1, 3)) if rtype == "echo" else None,
        "system": draw(st.sampled_from(SYSTEMS)) if rtype == "echo" else None,
        "intended_us": intended,
        "sent_us": intended + draw(st.integers(0, 1000)),
        "acked_us": None,
        "received_us": None,
        "lost": False,
        "timeout_us": None,
        "max_us": None,
        "event_us": intended,
        "n": draw(st.integers(1, 500)) if rtype == "data_loss" else 1,
    }
    if rtype == "echo":
        ack, recv = draw(maybe_us), draw(maybe_us)
        row["acked_us"] = None if ack is None else intended + ack
        row["received_us"] = None if recv is None else intended + recv
        if draw(st.booleans()) and recv is None:
            row["lost"], row["timeout_us"] = True, draw(st.integers(1, 30_000_000))
    if rtype == "hiccup":
        row["max_us"] = draw(st.integers(0, 10**11))  # some above the layout's highest value
    if rtype == "late" and draw(st.booleans()):
        row["partition"] = 2  # a late echo keeps its partition, a late hiccup has none
    return row


def reference(rows: list[dict[str, Any]]) -> dict[tuple[Any, ...], list[int]]:
    """Row by row, as the Spark expressions before the combiner did it."""
    out: dict[tuple[Any, ...], list[int]] = {}
    spans = [SPEC.finest_us]  # the coarser resolutions are merged in Spark

    def add(
        row: dict[str, Any], kind: int, value: int, lost: int, partition: Any, span_list: list[int]
    ) -> None:
        leader = row["leader"] if row["leader"] is not None else -1
        leader = leader if row["rtype"] == "echo" and kind < 10 else -2
        reason = row["system"] if kind == STAT_CODES["system"] else row["reason"]
        for span in span_list:
            end = row["event_us"] - row["event_us"] % span + span
            bucket = int(LAYOUT.index_of([value])[0])
            key = (
                end,
                row["cluster"],
                row["topic"],
                partition,
                leader,
                kind,
                reason if kind >= 10 else None,
                bucket,
            )
            acc = out.setdefault(key, [0, 0, LEAST, 0, 0])
            acc[0] += row["n"]
            acc[1] += lost
            acc[2] = max(acc[2], value)
            acc[3] += value * row["n"]
            acc[4] = max(acc[4], row["event_us"])

    for row in rows:
        if row["rtype"] == "echo":
            for kind, span in LATENCY_SPANS.items():
                if span.if_lost and row["lost"]:
                    value, lost = row[span.if_lost], 1
                else:
                    end = row[span.end]
                    value, lost = (None if end is None else end - row[span.start]), 0
                if value is not None:
                    add(row, KIND_CODES[kind], value, lost, row["partition"], spans)
            add(row, STAT_CODES["system"], 0, 0, None, spans[:1])  # echoes by system probed
        elif row["rtype"] == "hiccup":
            add(row, KIND_CODES["hiccup"], row["max_us"], 0, -1, spans)
        else:
            partition = row["partition"]
            if row["rtype"] == "late" and partition is None:
                partition = -1
            add(row, STAT_CODES[row["rtype"]], 0, 0, partition, spans[:1])
    return out


def as_dict(table: pa.Table) -> dict[tuple[Any, ...], list[int]]:
    out = {}
    for r in table.to_pylist():
        key = tuple(r[k] for k in combine_mod.GROUP_KEYS)
        assert key not in out, f"group {key} twice"
        out[key] = [r["n"], r["lost"], r["max_us"], r["sum_us"], r["event_us"]]
    return out


@settings(max_examples=60, deadline=None)
@given(st.lists(source_row(), max_size=120))
def test_combine_equals_the_row_by_row_reference(rows: list[dict[str, Any]]) -> None:
    table = pa.Table.from_pylist(rows, schema=SOURCE_SCHEMA)
    got = combine(table, SPEC, LAYOUT)
    assert got.schema == BUCKET_SCHEMA
    assert as_dict(got) == reference(rows)


def by_histogram(buckets: dict[tuple[Any, ...], list[int]]) -> dict[tuple[Any, ...], Any]:
    """Bucket rows as whole histograms: {bucket: count}, lost, max, sum, latest event."""
    out: dict[tuple[Any, ...], Any] = {}
    for (*key, bucket), (n, lost, max_us, sum_us, event_us) in buckets.items():
        h = out.setdefault(tuple(key), [{}, 0, LEAST, 0, 0])
        h[0][bucket] = h[0].get(bucket, 0) + n
        h[1] += lost
        h[2] = max(h[2], max_us)
        h[3] += sum_us
        h[4] = max(h[4], event_us)
    return out


@settings(max_examples=30, deadline=None)
@given(st.lists(source_row(), max_size=120), st.lists(st.integers(1, 40), max_size=6))
def test_chunked_combining_merges_to_the_same_partials(
    rows: list[dict[str, Any]], cuts: list[int]
) -> None:
    """A reader combines whatever chunks Kafka hands it: the merged partials never differ."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(combine_mod, "COMBINE_ROWS", 7)
        mp.setattr(combine_mod, "MAX_PENDING_PARTIALS", 50)
        combiner = Combiner(SPEC, LAYOUT)
        batches: list[pa.RecordBatch] = []
        start = 0
        for size in [*cuts, len(rows)]:
            chunk = rows[start : start + size]
            start += size
            if chunk:
                marked = pa.RecordBatch.from_pylist(chunk, schema=SOURCE_SCHEMA)
                batches += list(combiner.add(marked))
        batches += list(combiner.finish())
    partials = pa.Table.from_batches(batches, schema=PARTIAL_SCHEMA)
    merged: dict[tuple[Any, ...], Any] = defaultdict(lambda: [{}, 0, LEAST, 0, 0])
    for r in partials.to_pylist():  # what Spark's state (HistogramMerge) does with them
        lost, max_us, sum_us, buckets, counts = decode(r["hist"])
        assert list(buckets) == sorted(set(buckets)), "buckets ascending, each once"
        acc = merged[tuple(r[k] for k in HIST_KEYS)]
        for b, c in zip(buckets.tolist(), counts.tolist(), strict=True):
            acc[0][b] = acc[0].get(b, 0) + c
        acc[1] += lost
        acc[2] = max(acc[2], max_us)
        acc[3] += sum_us
        acc[4] = max(acc[4], r["event_us"])
    assert dict(merged) == by_histogram(reference(rows))


def test_one_histogram_per_window_series_and_kind() -> None:
    """The rows into Spark grow with windows × series × kinds, not with the buckets."""
    rows = []
    for i in range(20_000):
        intended = T0 + i * 50  # one second: one window of each resolution
        rows.append(
            {"rtype": "echo", "cluster": "c", "topic": "t", "partition": i % 4, "lost": False,
             "leader": 1, "system": "kafka", "intended_us": intended, "sent_us": intended + 20,
             "acked_us": intended + 900 + i * 7 % 5000,
             "received_us": intended + 1500 + i * 13 % 90_000, "event_us": intended, "n": 1}
        )  # fmt: skip
    combiner = Combiner(SPEC, LAYOUT)
    out = list(combiner.add(pa.RecordBatch.from_pylist(rows, schema=SOURCE_SCHEMA)))
    out += list(combiner.finish())
    got = pa.Table.from_batches(out, schema=PARTIAL_SCHEMA)
    # 4 partitions × 3 kinds in the finest window (Spark merges the coarser resolutions), plus
    # the echoes counted by system
    assert got.num_rows == 4 * 3 + 1


def test_combining_shrinks_a_busy_second_to_far_fewer_rows() -> None:
    """The point of it: 20,000 echoes of one second in 4 partitions become a few thousand rows."""
    rows = []
    for i in range(20_000):
        intended = T0 + i * 50
        rows.append(
            {"rtype": "echo", "cluster": "c", "topic": "t", "partition": i % 4, "lost": False,
             "intended_us": intended, "sent_us": intended + 20, "acked_us": intended + 900 + i % 97,
             "received_us": intended + 1500 + i % 311, "event_us": intended, "n": 1}
        )  # fmt: skip
    got = combine(pa.Table.from_pylist(rows, schema=SOURCE_SCHEMA), SPEC, LAYOUT)
    assert got.num_rows < 20_000 * 9 / 20
    assert sum(r["n"] for r in got.to_pylist() if r["kind"] == 0) == 20_000  # finest only


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 10**6), st.integers(0, 10**7), st.integers(0, 10**8), st.booleans()
        ),
        min_size=1,
        max_size=40,
    )
)
def test_each_kind_is_the_echo_reference_latency(cases: list[tuple[int, int, int, bool]]) -> None:
    """Parsed from the wire, marked and combined: each kind's value is ``Echo.latency_us``."""
    from core.echo import Echo, encode_record
    from streaming.parse import parse_values

    span = SPEC.finest_us
    echoes = [
        Echo("p", "c", "t", 0, 1, i, 1, T0 + i * span, T0 + i * span + sent, T0 + i * span + acked,
             None if lost else T0 + i * span + rcvd, lost=lost,
             timeout_us=30_000_000 if lost else None)
        for i, (sent, acked, rcvd, lost) in enumerate(cases)
    ]  # fmt: skip
    marked = pa.Table.from_batches(
        [mark_late(parse_values([encode_record(e) for e in echoes]), SPEC, 0)]
    )
    partials = combine(marked, SPEC, LAYOUT).to_pylist()
    got = {(r["window_end_us"], r["kind"]): r for r in partials if r["kind"] < STAT_CODES["system"]}
    systems = [r for r in partials if r["kind"] == STAT_CODES["system"]]
    assert {r["reason"] for r in systems} == {"kafka"}
    assert sum(r["n"] for r in systems) == len(echoes)
    for e in echoes:
        for kind in LATENCY_SPANS:
            row = got.pop((e.intended_us + span, KIND_CODES[kind]))
            latency = e.latency_us(kind)
            assert (row["n"], row["max_us"], row["sum_us"]) == (1, latency, latency), (kind, e)
            assert row["lost"] == (1 if kind == "e2e" and e.lost else 0)
    assert not got


@settings(max_examples=40, deadline=None)
@given(st.lists(source_row().filter(lambda r: r["rtype"] == "echo"), min_size=1, max_size=200))
def test_echo_only_batches_equal_the_reference(rows: list[dict[str, Any]]) -> None:
    """Batches of echoes alone take the numpy path (``_echo_buckets``): the same rows."""
    table = pa.Table.from_pylist(rows, schema=SOURCE_SCHEMA)
    got = combine(table, SPEC, LAYOUT)
    assert got.schema == BUCKET_SCHEMA
    assert as_dict(got) == reference(rows)
    assert as_dict(combine_mod.merge_partials([got, got])) == {
        k: [2 * v[0], 2 * v[1], v[2], 2 * v[3], v[4]] for k, v in reference(rows).items()
    }


def sort_only(mp: pytest.MonkeyPatch) -> None:
    """No slots for counting: every grouping takes the sort (the combiner before counting)."""
    mp.setattr(grouping, "DENSE_SLOTS_PER_ELEMENT", 0)
    mp.setattr(grouping, "DENSE_MIN_SLOTS", 0)


def decoded(batches: list[pa.RecordBatch]) -> list[tuple[Any, ...]]:
    """Partial rows as comparable tuples: key, lost, max, sum, buckets, counts, latest event."""
    out = []
    for r in pa.Table.from_batches(batches, schema=PARTIAL_SCHEMA).to_pylist():
        lost, max_us, sum_us, buckets, counts = decode(r["hist"])
        key = tuple(r[k] for k in HIST_KEYS)
        out.append((key, lost, max_us, sum_us, buckets.tolist(), counts.tolist(), r["event_us"]))
    return sorted(out, key=repr)


def combined(rows: pa.Table, cuts: list[int], sort: bool) -> list[tuple[Any, ...]]:
    """What a read task hands Spark for ``rows`` in chunks of ``cuts``, counting or sorting."""
    with pytest.MonkeyPatch.context() as mp:
        if sort:
            sort_only(mp)
        combiner = Combiner(SPEC, LAYOUT)
        out: list[pa.RecordBatch] = []
        start = 0
        for size in [*cuts, rows.num_rows]:
            chunk = rows.slice(start, size)
            start += size
            if chunk.num_rows:
                for batch in chunk.to_batches():
                    out += list(combiner.add(batch))
        out += list(combiner.finish())
    return decoded(out)


@settings(max_examples=40, deadline=None)
@given(st.lists(source_row(), max_size=150), st.lists(st.integers(1, 60), max_size=5))
def test_counting_and_sorting_hand_spark_the_same_histograms(
    rows: list[dict[str, Any]], cuts: list[int]
) -> None:
    """The counting path's partials are the sort path's, byte for byte, however chunked:
    echoes (lost, null spans) mixed with hiccups and counted rows, over several windows."""
    table = pa.Table.from_pylist(rows, schema=SOURCE_SCHEMA)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(combine_mod, "COMBINE_ROWS", 40)
        assert combined(table, cuts, sort=False) == combined(table, cuts, sort=True)
    counting = combine(table, SPEC, LAYOUT)
    with pytest.MonkeyPatch.context() as mp:
        sort_only(mp)
        sorting = combine(table, SPEC, LAYOUT)
    assert as_dict(counting) == as_dict(sorting) == reference(rows)


def echo_table(
    n: int, partitions: int, windows: int, seed: int, wide: bool = False, clusters: int = 2
) -> pa.Table:
    """Echoes over ``windows`` finest windows and ``partitions`` series: lognormal latencies
    around 5 ms with rare multi-second stalls (``wide``: log-uniform from 1 µs to 100 s, past
    the layout's highest), a few negative, lost and unacknowledged."""
    rng = np.random.default_rng(seed)
    intended = T0 + rng.integers(0, windows * SPEC.finest_us, n)
    if wide:
        latency = np.exp(rng.uniform(0, np.log(10**8), n)).astype(np.int64)
    else:
        latency = rng.lognormal(8.5, 1.0, n).astype(np.int64) + 1
        stall = rng.random(n) < 0.001
        latency[stall] = rng.integers(1_000_000, 5_000_000, int(stall.sum()))
    latency[rng.random(n) < 0.01] = -5  # a clock step back
    lost = rng.random(n) < 0.02
    unacked = rng.random(n) < 0.05
    partition = rng.integers(0, partitions, n)
    cols = {
        "rtype": pa.array(["echo"] * n),
        "reason": pa.nulls(n, pa.string()),
        "cluster": pa.array(rng.choice(["a", "b"][:clusters], n)),
        "topic": pa.array(["t"] * n),
        "partition": pa.array(partition),
        "leader": pa.array(partition % 3, mask=rng.random(n) < 0.1),
        "system": pa.array(rng.choice(["kafka", "nats"], n)),
        "intended_us": pa.array(intended),
        "sent_us": pa.array(intended + rng.integers(0, 300, n)),
        "acked_us": pa.array(intended + latency // 2, mask=unacked),
        "received_us": pa.array(intended + latency, mask=lost),
        "lost": pa.array(lost),
        "timeout_us": pa.array(np.full(n, 30_000_000), mask=~lost),
        "max_us": pa.nulls(n, pa.int64()),
        "event_us": pa.array(intended),
        "n": pa.array(np.ones(n, np.int64)),
    }
    return pa.Table.from_arrays([cols[f.name] for f in SOURCE_SCHEMA], schema=SOURCE_SCHEMA)


def calls_to_sort(mp: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    runs = grouping.runs

    def counted(key: Any) -> Any:
        calls.append(len(key))
        return runs(key)

    mp.setattr(grouping, "runs", counted)
    return calls


@pytest.mark.parametrize("seed", [1, 2])
def test_a_realistic_batch_is_grouped_by_counting_with_the_sorts_result(seed: int) -> None:
    """Tens of thousands of echoes, 12 series, two windows, in three chunks: no sort at all,
    the same partials."""
    table = echo_table(60_000, 12, 2, seed, clusters=1)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(combine_mod, "COMBINE_ROWS", 20_000)
        sorts = calls_to_sort(mp)
        counting = combined(table, [10_000] * 5, sort=False)
        assert sorts == []
        assert counting == combined(table, [10_000] * 5, sort=True)
    assert sum(sum(h[5]) for h in counting if h[0][5] == KIND_CODES["e2e"]) == 60_000


def test_weighted_echoes_are_counted_with_their_weights() -> None:
    """An echo row's ``n`` weighs its count and sum (every source row is one echo today; the
    combiner keeps the weight general): counting equals the sort and the reference."""
    table = echo_table(5_000, 12, 2, 5, clusters=1)
    weights = np.random.default_rng(5).integers(1, 4, table.num_rows)
    table = table.set_column(table.schema.get_field_index("n"), "n", pa.array(weights))
    with pytest.MonkeyPatch.context() as mp:
        sorts = calls_to_sort(mp)
        got = combine(table, SPEC, LAYOUT)
        assert sorts == []
    assert as_dict(got) == reference(table.to_pylist())
    assert combined(table, [1_000], sort=False) == combined(table, [1_000], sort=True)


def test_too_many_slots_to_count_falls_back_to_the_sort() -> None:
    """A backlog over hundreds of windows and series, and a few echoes each spread over the
    whole layout: counting would need more slots than a few per element, so they are sorted,
    and the partials still equal the row-by-row reference."""
    for table in (
        echo_table(2_000, 40, 500, 3),  # windows × kinds × series past the bound
        echo_table(200, 40, 1, 4, wide=True),  # buckets × series past the bound
    ):
        assert grouping.dense_limit(4 * table.num_rows) < 40 * LAYOUT.counts_len
        with pytest.MonkeyPatch.context() as mp:
            sorts = calls_to_sort(mp)
            got = combine(table, SPEC, LAYOUT)
        assert sorts, "the echo path sorted"
        assert as_dict(got) == reference(table.to_pylist())
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(combine_mod, "COMBINE_ROWS", 50)
            assert combined(table, [], sort=False) == combined(table, [], sort=True)
