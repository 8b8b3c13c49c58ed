"""The Kafka data source's reader on its own, against a real (embedded) broker over TCP.

Spark calls these methods; here the test calls them in-process, so each decision the reader
makes (offsets, read limits, the batch watermark, late marking, retention gaps) is checked
directly and quickly. The whole job is covered by test_stream_oracle.py.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from kafka_cluster import producer, unique_topic
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

from core.echo import Echo, encode_record
from core.windows import WindowSpec
from streaming.config import StreamConfig
from streaming.gaps import KafkaRange
from streaming.offset_log import batch_watermark_us
from streaming.options import STALL_TIMEOUT_S, encode_options
from streaming.resets import partition_offsets
from streaming.source import KafkaEchoReader, KafkaSlice, slices

T0 = 1_700_000_000_000_000 - 1_700_000_000_000_000 % 60_000_000  # in the past: see max_clock_skew
FINEST_US = 10_000_000


def echo(seq: int, intended_us: int, partition: int = 0, pad: int = 0) -> bytes:
    raw = encode_record(
        Echo(
            "p", "c", "probe", partition, 1, seq, 1, intended_us, intended_us, None, intended_us + 7
        )
    )
    return raw[:-1] + f',"pad":"{"x" * pad}"}}'.encode() if pad else raw


def reader(
    bootstrap: str,
    topic: str,
    max_input_partitions: int = 4,
    stall_timeout_s: float = STALL_TIMEOUT_S,
    **settings: Any,
) -> KafkaEchoReader:
    """A reader on the options the job would give it for these ``stream:`` settings."""
    windows = WindowSpec((FINEST_US // 1_000_000, 60)).names
    config = StreamConfig(bootstrap=bootstrap, echo_topic=topic, windows=windows, **settings)
    return KafkaEchoReader(encode_options(config, None, max_input_partitions, stall_timeout_s))


def read_all(r: KafkaEchoReader, part: KafkaSlice) -> pa.Table:
    """The reader's marked rows (what its combiner turns into partial histograms)."""
    return pa.Table.from_batches(list(r.marked_rows(part)))


def one(start: int, end: int, watermark_us: int) -> KafkaSlice:
    """A slice of partition 0 alone."""
    return KafkaSlice(0, [KafkaRange(0, start, end)], watermark_us)


def test_offsets_and_read_limits(broker: Any) -> None:
    topic = unique_topic(broker, 3)
    p = producer(broker.bootstrap)
    for i in range(90):
        p.produce(topic, echo(i, T0 + i), partition=i % 3)
    p.flush()
    earliest = reader(broker.bootstrap, topic, starting_offsets="earliest")
    latest = reader(broker.bootstrap, topic, max_records_per_batch=20)
    try:
        assert partition_offsets(earliest.initialOffset()) == {"0": 0, "1": 0, "2": 0}
        assert partition_offsets(latest.initialOffset()) == {"0": 30, "1": 30, "2": 30}
        start = earliest.initialOffset()
        assert partition_offsets(earliest.latestOffset(start, ReadAllAvailable())) == {
            "0": 30,
            "1": 30,
            "2": 30,
        }
        capped = latest.latestOffset(start, latest.getDefaultReadLimit())
        assert isinstance(latest.getDefaultReadLimit(), ReadMaxRows)
        # 20 rows over 3 partitions of 30 pending each: 20 * 30 // 90 = 6 each
        assert partition_offsets(capped) == {"0": 6, "1": 6, "2": 6}
        # Kafka partitions with records, in slices (4 at most by default); none for an empty one
        parts = earliest.partitions(start, {"0": 30, "1": 0, "2": 5})
        ranges = [[(k.partition, k.start, k.end) for k in s.ranges] for s in parts]
        assert ranges == [[(0, 0, 30)], [(2, 0, 5)]]
        rows = read_all(earliest, parts[1])
        assert rows.num_rows == 5 and set(rows["rtype"].to_pylist()) == {"echo"}
        assert rows["event_us"].to_pylist() == rows["intended_us"].to_pylist()
        assert rows["n"].to_pylist() == [1] * 5
        # one slice reads several partitions through one consumer, each to its own end
        (both,) = reader(broker.bootstrap, topic, max_input_partitions=1).partitions(
            start, {"0": 12, "1": 30, "2": 7}
        )
        rows = read_all(earliest, both)
        got = sorted(
            zip(rows["partition"].to_pylist(), rows["intended_us"].to_pylist(), strict=True)
        )
        sent = sorted((i % 3, T0 + i) for i in range(90))
        # echo() stamps partition 0 inside the record; the Kafka partition is i % 3
        assert len(got) == 12 + 30 + 7
        want = [
            t for k, t in sent if (k == 0 and t - T0 < 36) or k == 1 or (k == 2 and t - T0 < 21)
        ]
        assert sorted(t for _, t in got) == sorted(want)
    finally:
        earliest.stop()
        latest.stop()


def test_batches_end_at_the_last_record_not_at_list_offsets(any_broker: Any) -> None:
    """Tansu 0.6.0's ListOffsets says the last record batch's base offset + 1 (docs/brokers.md):
    with normal producer batching every record is still planned and read, exactly once."""
    broker = any_broker  # the mock, Tansu, Apache Kafka (its offsets carry the topic id too)
    topic = unique_topic(broker, 2)
    p = producer(broker.bootstrap, linger_ms=100)

    def batch(seqs: range) -> None:  # one record batch per call (linger, one partition)
        for i in seqs:
            p.produce(topic, echo(i, T0 + i), partition=0)
        assert p.flush(10) == 0

    batch(range(0, 5))  # offsets 0..4; partition 1 stays empty
    r = reader(broker.bootstrap, topic, starting_offsets="earliest")
    latest = reader(broker.bootstrap, topic)
    try:
        assert partition_offsets(latest.initialOffset()) == {"0": 5, "1": 0}
        start = r.initialOffset()
        first = r.latestOffset(start, ReadAllAvailable())
        assert partition_offsets(first) == {"0": 5, "1": 0}
        assert r.latestOffset(first, ReadAllAvailable()) == first  # idle: no batch
        batch(range(5, 8))  # offsets 5..7
        # a capped batch ends inside the newest record batch, the next starts there
        capped = r.latestOffset(first, ReadMaxRows(2))
        assert partition_offsets(capped) == {"0": 7, "1": 0}
        last = r.latestOffset(capped, ReadAllAvailable())
        assert partition_offsets(last) == {"0": 8, "1": 0}
        got = [
            read_all(r, one(a["0"], b["0"], 0))["intended_us"].to_pylist()
            for a, b in ((start, first), (first, capped), (capped, last))
        ]
        assert got == [[T0 + i for i in range(0, 5)], [T0 + 5, T0 + 6], [T0 + 7]]
    finally:
        r.stop()
        latest.stop()


def test_batch_watermark_comes_from_the_newest_offset_log_entry(tmp_path: Path) -> None:
    assert batch_watermark_us(None) == 0
    assert batch_watermark_us(str(tmp_path)) == 0  # no offset log yet: the first batch
    offsets = tmp_path / "offsets"
    offsets.mkdir()
    for batch_id, wm_ms in ((0, 0), (1, 5_000), (2, 42_000)):
        meta = {"batchWatermarkMs": wm_ms, "batchTimestampMs": 1, "conf": {}}
        (offsets / str(batch_id)).write_text(f'v1\n{json.dumps(meta)}\n{{"0":1}}')
    (offsets / ".3.tmp").write_text("v1\n{}")  # Spark's in-flight temp files do not count
    assert batch_watermark_us(str(tmp_path)) == 42_000_000


def test_late_echoes_and_bad_records_are_marked_not_dropped(broker: Any) -> None:
    topic = unique_topic(broker, 1)
    wm_us = T0 + 20_000_000
    values = [
        echo(0, T0 + 5_000_000),  # finest window [T0, T0+10s) closed long ago: late
        echo(1, T0 + 10_000_000),  # window ends at T0+20s == watermark: closed, late
        echo(2, T0 + 19_999_999),  # same window: late
        echo(3, T0 + 20_000_000),  # window [T0+20s, T0+30s) still open
        b"{not json",
        echo(4, T0 + 25_000_000),
    ]
    p = producer(broker.bootstrap)
    for v in values:
        p.produce(topic, v, partition=0)
    p.flush()
    r = reader(broker.bootstrap, topic)
    rows = read_all(r, one(0, len(values), wm_us)).to_pylist()
    assert [x["rtype"] for x in rows] == ["late", "late", "late", "echo", "bad", "echo"]
    assert rows[4]["reason"] == "not_json"
    # counted rows carry the batch watermark as event time, so Spark never drops them
    assert [x["event_us"] for x in rows] == [wm_us] * 3 + [T0 + 20_000_000, wm_us, T0 + 25_000_000]
    assert rows[0]["cluster"] == "c" and rows[0]["topic"] == "probe" and rows[0]["partition"] == 0


def test_offsets_lost_to_retention_are_counted_and_reading_goes_on(broker: Any) -> None:
    topic = unique_topic(broker, 1)
    p = producer(broker.bootstrap, linger_ms=20)
    total = 3500  # ~2 KiB each: more than the ~5 MiB the embedded broker keeps per partition
    for i in range(total):
        p.produce(topic, echo(i, T0 + i, pad=2000), partition=0)
        if i % 500 == 0:
            p.flush()
    p.flush()
    r = reader(broker.bootstrap, topic)
    try:
        low = r.initialOffset()  # latest; retention has moved the low watermark off 0
        marks = r._watermarks()["0"]
    finally:
        r.stop()
    assert partition_offsets(low) == {"0": total}
    assert marks[0] > 0, "retention did not kick in"
    rows = read_all(r, one(0, total, T0)).to_pylist()
    loss = [x for x in rows if x["rtype"] == "data_loss"]
    assert len(loss) == 1 and loss[0]["n"] == marks[0]
    assert (loss[0]["topic"], loss[0]["partition"], loss[0]["event_us"]) == (topic, 0, T0)
    echoes = [x for x in rows if x["rtype"] == "echo"]
    assert len(echoes) == total - marks[0]
    assert loss[0]["n"] + len(echoes) == total  # every offset accounted for


def test_a_slow_broker_is_waited_for_never_counted_as_loss(broker: Any) -> None:
    topic = unique_topic(broker, 1)
    p = producer(broker.bootstrap)
    for i in range(5):
        p.produce(topic, echo(i, T0 + i), partition=0)
    p.flush()

    def late_writer() -> None:  # the rest of the range shows up only after a while
        time.sleep(3.5)
        for i in range(5, 10):
            p.produce(topic, echo(i, T0 + i), partition=0)
        p.flush()

    writer = threading.Thread(target=late_writer)
    writer.start()
    rows = read_all(reader(broker.bootstrap, topic), one(0, 10, 0)).to_pylist()
    writer.join()
    assert [x["rtype"] for x in rows] == ["echo"] * 10


def test_records_that_never_come_fail_the_batch_instead_of_vanishing(broker: Any) -> None:
    topic = unique_topic(broker, 1)
    p = producer(broker.bootstrap)
    for i in range(3):
        p.produce(topic, echo(i, T0 + i), partition=0)
    p.flush()
    r = reader(broker.bootstrap, topic, stall_timeout_s=3)
    got: list[str] = []
    with pytest.raises(RuntimeError, match="no records"):
        for batch in r.marked_rows(one(0, 8, 0)):
            got += batch.column("rtype").to_pylist()
    assert got == ["echo"] * 3  # no made-up data_loss row for offsets that were never lost


def test_slices_balance_records_and_keep_every_range() -> None:
    ranges = [KafkaRange(p, 0, n) for p, n in enumerate([100, 10, 10, 80, 5, 5, 90])]
    out = slices(ranges, 3, 42)
    assert len(out) == 3 and all(s.watermark_us == 42 for s in out)
    assert sorted((r for s in out for r in s.ranges), key=lambda r: r.partition) == ranges
    loads = sorted(sum(r.end - r.start for r in s.ranges) for s in out)
    assert loads == [100, 100, 100]
    assert [s.index for s in out] == [0, 1, 2]
    assert len(slices(ranges[:2], 8, 0)) == 2  # never more slices than ranges
    assert slices([], 4, 0) == []


def test_read_hands_spark_the_combined_partials_of_the_marked_rows(broker: Any) -> None:
    """What Spark receives is the combiner's output over exactly the rows the reader marked."""
    from core.hdr import HdrLayout
    from streaming.combine import combine, histograms
    from streaming.state_keys import PARTIAL_SCHEMA
    from streaming.wire import decode

    topic = unique_topic(broker, 1)
    p = producer(broker.bootstrap)
    for i in range(40):
        p.produce(topic, echo(i, T0 + i * 1_000_000), partition=0)
    p.produce(topic, b"{not json", partition=0)
    p.flush()
    r = reader(broker.bootstrap, topic, starting_offsets="earliest")
    try:
        part = one(0, 41, T0 + FINEST_US)  # the first 10 s window has closed: 10 late echoes
        partials = pa.Table.from_batches(list(r.read(part)), schema=PARTIAL_SCHEMA)
        expected = histograms(combine(read_all(r, part), r.windows, HdrLayout()))
    finally:
        r.stop()
    key = list(PARTIAL_SCHEMA.names)
    assert sorted(partials.to_pylist(), key=lambda x: [str(x[k]) for k in key]) == sorted(
        expected.to_pylist(), key=lambda x: [str(x[k]) for k in key]
    )
    late = [decode(x["hist"]) for x in partials.to_pylist() if x["kind"] == 10]
    assert sum(int(h[4].sum()) for h in late) == 10
    e2e_10s = [decode(x["hist"]) for x in partials.to_pylist() if x["kind"] == 0]
    assert sum(int(h[4].sum()) for h in e2e_10s) == 30 and {h[1] for h in e2e_10s} == {7}
