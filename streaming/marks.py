"""The rows before the combiner: parsed echoes with their event time and weight, late ones counted.

Spark drops rows behind its watermark without a trace, so an echo whose *finest* window has
already closed when its batch is planned becomes a counted ``late`` row instead.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from core.windows import WindowSpec
from streaming.parse import PARSED_SCHEMA

#: Marked rows, before the combiner: parsed echoes and hiccups, plus counted-not-measured rows.
SOURCE_SCHEMA = pa.schema([*PARSED_SCHEMA, ("event_us", pa.int64()), ("n", pa.int64())])


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
