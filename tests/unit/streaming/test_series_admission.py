"""The series cap of Spark's state, decided in the read tasks: exact, bounded, alike on replay."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.echo import Echo, Hiccup, encode_record
from core.windows import WindowSpec
from streaming import admission
from streaming.admission import SERIES_CAP, TaskAdmission, plan, quotas
from streaming.config import StreamConfig
from streaming.marks import SOURCE_SCHEMA, mark_late
from streaming.options import encode_options
from streaming.parse import parse_values
from streaming.source import KafkaEchoReader

T0 = 1_800_000_000_000_000 - 1_800_000_000_000_000 % 3_600_000_000
HOUR = 3_600_000_000


def echo(topic: str, at_us: int = T0) -> bytes:
    return encode_record(Echo("p", "c", topic, 0, 1, 0, 1, at_us, at_us, None, at_us + 9))


def rows(values: list[bytes], wm: int = 0) -> pa.RecordBatch:
    return mark_late(parse_values(values), WindowSpec.from_names("10s,1h"), wm)


def test_quotas_split_the_free_places_and_rotate_the_remainder() -> None:
    assert quotas([3, 1, 2], 7, batch_id=0) == {1: 3, 2: 2, 3: 2}
    assert quotas([3, 1, 2], 7, batch_id=1) == {1: 2, 2: 3, 3: 2}
    assert quotas([3, 1, 2], 7, batch_id=2) == {1: 2, 2: 2, 3: 3}
    assert quotas([1, 2], -4, batch_id=0) == {1: 0, 2: 0}
    assert sum(quotas(list(range(32)), 10, batch_id=5).values()) == 10


def test_a_task_admits_known_series_and_new_ones_within_its_ranges_quota(tmp_path: Path) -> None:
    p = plan(str(tmp_path), 0, 0, HOUR, max_series=3, partitions=[0, 1])
    assert p.quotas == {0: 2, 1: 1}
    task = TaskAdmission(p, [0, 1])
    # range 0 reads a, c, a, d, a hiccup; range 1 reads a, b, e. a is new to range 1 too: the
    # ranges decide apart, so no decision depends on how the consumer interleaves them
    hiccup = encode_record(Hiccup("p", "c", T0, T0, 1, 1, 1))
    values = [echo("a"), echo("a"), echo("b"), echo("e"), echo("c"), echo("a"), echo("d"), hiccup]
    kafka = np.array([0, 1, 1, 1, 0, 0, 0, 0])
    out = task.admit(rows(values), kafka, watermark_us=T0 - HOUR).to_pylist()
    refused = [i for i, r in enumerate(out) if r["reason"] == SERIES_CAP]
    # range 0 (quota 2): a and c in, d and the hiccup's series refused; range 1 (quota 1): a in
    assert refused == [2, 3, 6, 7], out
    assert [out[i]["topic"] for i in (0, 1, 4, 5)] == ["a", "a", "c", "a"]
    for i in refused:
        assert out[i]["rtype"] == "bad" and out[i]["cluster"] is None and out[i]["topic"] is None
        assert out[i]["event_us"] == T0 - HOUR and out[i]["n"] == 1
    task.save()
    seen0 = admission._load_series(p.seen_path(0))
    seen1 = admission._load_series(p.seen_path(1))
    assert seen0 == {("c", "a", 0): T0, ("c", "c", 0): T0} and seen1 == {("c", "a", 0): T0}


def test_the_book_carries_admitted_series_to_the_next_batch_and_a_replay_reuses_it(
    tmp_path: Path,
) -> None:
    ck = str(tmp_path)
    p0 = plan(ck, 0, 0, HOUR, max_series=2, partitions=[0])
    t0 = TaskAdmission(p0, [0])
    t0.admit(rows([echo("a"), echo("b"), echo("x")]), np.zeros(3, int), 0)
    t0.save()
    p1 = plan(ck, 1, 0, HOUR, max_series=2, partitions=[0])
    assert p1.quotas == {0: 0}
    assert admission.known_series(p1) == {("c", "a", 0), ("c", "b", 0)}
    out = (
        TaskAdmission(p1, [0]).admit(rows([echo("x"), echo("b")]), np.zeros(2, int), 0).to_pylist()
    )
    assert [r["reason"] for r in out] == [SERIES_CAP, None]
    # a replay of batch 1 (the same offsets) plans the same book, though batch 1 saw more since
    p1.seen_path(0).parent.mkdir()
    admission._write_json(p1.seen_path(0), [["c", "z", 0, T0]])
    assert plan(ck, 1, 0, HOUR, max_series=2, partitions=[0]) == p1
    assert set(admission._load_series(p1.known_path())) == {("c", "a", 0), ("c", "b", 0)}
    # older books are gone: the book holds one batch's series at a time
    assert sorted(x.name for x in Path(p1.book).iterdir()) == ["known-1.json", "seen-1"]


def test_a_series_leaves_the_book_when_its_coarsest_window_closed(tmp_path: Path) -> None:
    ck = str(tmp_path)
    p0 = plan(ck, 0, 0, HOUR, max_series=1, partitions=[0])
    t = TaskAdmission(p0, [0])
    t.admit(rows([echo("a", T0 + 5)]), np.zeros(1, int), 0)
    t.save()
    # the watermark reaches the end of a's hour: its rows leave Spark's state, a frees its place
    still = plan(ck, 1, T0 + HOUR - 1, HOUR, max_series=1, partitions=[0])
    assert admission.known_series(still) == {("c", "a", 0)} and still.quotas == {0: 0}
    gone = plan(ck, 2, T0 + HOUR, HOUR, max_series=1, partitions=[0])
    assert admission.known_series(gone) == set() and gone.quotas == {0: 1}


def test_rows_without_a_series_are_never_refused(tmp_path: Path) -> None:
    p = plan(str(tmp_path), 0, 0, HOUR, max_series=1, partitions=[0])
    out = TaskAdmission(p, [0]).admit(rows([b"{bad", echo("a")]), np.zeros(2, int), 0)
    assert out.schema == SOURCE_SCHEMA
    assert [(r["rtype"], r["reason"]) for r in out.to_pylist()] == [
        ("bad", "not_json"),
        ("echo", None),
    ]


def test_the_source_stamps_each_slice_with_the_batch_plan(tmp_path: Path) -> None:
    (tmp_path / "offsets").mkdir()
    (tmp_path / "offsets" / "4").write_text('v1\n{"batchWatermarkMs":0}\n{"0":0}\n')
    config = StreamConfig(bootstrap="x:1", echo_topic="t", windows="10s", max_series=5)
    reader = KafkaEchoReader(encode_options(config, str(tmp_path), max_input_partitions=2))
    parts = reader.partitions({"0": 0, "1": 0, "2": 5}, {"0": 10, "1": 10, "2": 5})
    assert len(parts) == 2
    for part in parts:
        assert part.series == admission.SeriesPlan(  # type: ignore[attr-defined]
            str(tmp_path / "nines-series"), 4, {0: 3, 1: 2}
        )


def reference_admit(
    rows_: list[dict[str, object]], kafka: list[int], known: set[object], quota: dict[int, int]
) -> tuple[list[bool], dict[int, dict[object, int]]]:
    """The cap row by row, as the module states it: a series' fate is decided at its first row
    in its Kafka range; returns which rows are refused and what each range saw."""
    left = dict(quota)
    new: dict[int, set[object]] = {k: set() for k in quota}
    seen: dict[int, dict[object, int]] = {k: {} for k in quota}
    decided: dict[tuple[int, object], bool] = {}
    refused = []
    for r, k in zip(rows_, kafka, strict=True):
        if r["rtype"] not in admission.SUBJECT_RTYPES:
            refused.append(False)
            continue
        part = r["partition"] if r["partition"] is not None else admission.NO_PARTITION
        s = (r["cluster"], r["topic"], part)
        if (k, s) not in decided:
            ok = s in known or s in new[k] or left[k] > 0
            if ok and s not in known and s not in new[k]:
                left[k] -= 1
                new[k].add(s)
            decided[(k, s)] = ok
        if decided[(k, s)]:
            event = int(r["event_us"])  # type: ignore[call-overload]
            seen[k][s] = max(seen[k].get(s, event), event)
        refused.append(not decided[(k, s)])
    return refused, seen


@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["echo", "echo", "hiccup", "bad", "late"]),
            st.sampled_from(["c", "d"]),
            st.sampled_from(["a", "b", "t"]),
            st.integers(0, 3),
            st.integers(0, 2),
            st.integers(0, 5),
        ),
        min_size=1,
        max_size=40,
    ),
    st.integers(0, 4),
    st.booleans(),
    st.integers(0, 40),
)
def test_the_cap_is_the_row_by_row_reference_on_any_mix(
    tmp_path_factory: Any,
    cases: list[tuple[str, str, str, int, int, int]],
    free: int,
    one: bool,
    split: int,
) -> None:
    tmp = tmp_path_factory.mktemp("cap")
    kinds = {"hiccup": lambda c, t, p, s: Hiccup("p", c, T0 + s, T0 + s, 1, 1, 1)}
    values, kafka = [], []
    for kind, cluster, topic, part, k, s in cases:
        if one:  # every row of one series label but the partition: the label fast path
            cluster, topic = "c", "t"
        at = T0 + s * 1_000_000
        if kind == "bad":
            values.append(b"{bad")
        elif kind == "hiccup":
            values.append(encode_record(kinds["hiccup"](cluster, topic, part, s)))
        else:  # "late": an echo behind the watermark below
            when = T0 - 2 * HOUR if kind == "late" else at
            values.append(
                encode_record(Echo("p", cluster, topic, part, 1, 0, 1, when, when, None, when + 9))
            )
        kafka.append(k)
    p = plan(str(tmp), 0, 0, HOUR, max_series=free, partitions=[0, 1, 2])
    marked = rows(values, wm=T0 - HOUR)
    task = TaskAdmission(p, [0, 1, 2])
    # the rows in two fetches (pieces): the same decisions as in one
    at = min(split, marked.num_rows)
    ks = np.array(kafka)
    out = [
        r
        for a, b in ((0, at), (at, marked.num_rows))
        for r in task.admit(marked.slice(a, b - a), ks[a:b], watermark_us=T0 - HOUR).to_pylist()
    ]
    refused, seen = reference_admit(marked.to_pylist(), kafka, set(), p.quotas)
    assert [r["reason"] == SERIES_CAP for r in out] == refused
    for r, before, no in zip(out, marked.to_pylist(), refused, strict=True):
        assert r == before if not no else r["rtype"] == "bad" and r["cluster"] is None
    task.save()
    for k in (0, 1, 2):
        assert admission._load_series(p.seen_path(k)) == seen[k]
