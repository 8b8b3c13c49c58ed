"""The rows before the combiner: parsed echoes with their event time and weight, late ones counted.

Spark drops rows behind its watermark without a trace, so an echo whose *finest* window has
already closed when its batch is planned becomes a counted ``late`` row instead; one whose event
time is far ahead of its Kafka timestamp becomes a counted ``future`` row (``mark_future``).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from core.windows import WindowSpec
from streaming.gaps import Gap
from streaming.parse.rows import PARSED_SCHEMA

#: Marked rows, before the combiner: parsed echoes and hiccups, plus counted-not-measured rows.
SOURCE_SCHEMA = pa.schema([*PARSED_SCHEMA, ("event_us", pa.int64()), ("n", pa.int64())])


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


def offsets_reset_row(topic: str, partition: int, watermark_us: int) -> pa.RecordBatch:
    """The counted row of a partition whose offsets went back (``streaming.resets``): one event,
    at the batch's watermark (the old log's unread records are unknown)."""
    row = {
        "rtype": "offsets_reset",
        "topic": topic,
        "partition": partition,
        "event_us": watermark_us,
        "n": 1,
    }
    return pa.RecordBatch.from_pylist([row], schema=SOURCE_SCHEMA)


def mark_late(parsed: pa.RecordBatch, windows: WindowSpec, watermark_us: int) -> pa.RecordBatch:
    """Event time and weight per row; echoes whose finest window closed become ``late``.

    Columns with nothing to change (no late nor bad row: nearly every fetch) are handed on as
    they are: each string ``if_else`` is a pass over every row.
    """
    wm = watermark_us
    intended = parsed.column("intended_us")
    ints = np.asarray(pc.fill_null(intended, 0).to_numpy(zero_copy_only=False), np.int64)
    window_end = windows.window_end_us(ints)
    is_late = np.asarray(window_end <= wm)
    if intended.null_count:
        is_late &= np.asarray(pc.is_valid(intended).to_numpy(zero_copy_only=False))
    rtype = parsed.column("rtype")
    is_bad = pc.equal(rtype, "bad")
    n = np.ones(parsed.num_rows, np.int64)
    if not is_late.any() and not pc.any(is_bad).as_py():
        cols = [*parsed.columns, intended, pa.array(n)]
        return pa.RecordBatch.from_arrays(cols, schema=SOURCE_SCHEMA)
    late = pc.and_(pa.array(is_late), pc.invert(is_bad))
    rtype = pc.if_else(late, "late", rtype)
    event = pc.if_else(pc.or_(late, is_bad), pa.scalar(wm, pa.int64()), intended)
    cols = [rtype, *parsed.columns[1:], event, pa.array(n)]
    return pa.RecordBatch.from_arrays(cols, schema=SOURCE_SCHEMA)


def mark_future(parsed: pa.RecordBatch, kafka_us: pa.Array, max_skew_us: int) -> pa.RecordBatch:
    """Rows whose event time is more than ``max_skew_us`` ahead of their Kafka timestamp become
    ``bad``/``future`` with every other column null, so they never reach the watermark.

    One probe with a wrong clock an hour ahead would otherwise move the watermark an hour
    forward and make every later echo late. A null Kafka timestamp (none recorded) is trusted.
    """
    ahead = pc.fill_null(
        pc.greater(parsed.column("intended_us"), pc.add(kafka_us, max_skew_us)), False
    )
    if not pc.any(ahead).as_py():  # the usual fetch: no string compare per row
        return parsed
    future = pc.and_(ahead, pc.not_equal(parsed.column("rtype"), "bad"))
    if not pc.any(future).as_py():
        return parsed
    cols = [
        pc.if_else(future, "bad", parsed.column("rtype")),
        pc.if_else(future, "future", parsed.column("reason")),
        *(pc.if_else(future, pa.scalar(None, col.type), col) for col in parsed.columns[2:]),
    ]
    return pa.RecordBatch.from_arrays(cols, schema=PARSED_SCHEMA)
