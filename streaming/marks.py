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
    """Event time and weight per row; echoes whose finest window closed become ``late``."""
    wm = watermark_us
    intended = parsed.column("intended_us")
    window_end = windows.window_end_us(pc.fill_null(intended, 0).to_numpy(zero_copy_only=False))
    valid = pc.is_valid(intended).to_numpy(zero_copy_only=False)
    is_late = pa.array(np.asarray(window_end <= wm) & valid)
    is_bad = pc.equal(parsed.column("rtype"), "bad")
    is_late = pc.and_(is_late, pc.invert(is_bad))
    rtype = pc.if_else(is_late, "late", parsed.column("rtype"))
    event = pc.if_else(pc.or_(is_late, is_bad), pa.scalar(wm, pa.int64()), intended)
    cols = [rtype, *parsed.columns[1:], event, pa.array([1] * parsed.num_rows, pa.int64())]
    return pa.RecordBatch.from_arrays(cols, schema=SOURCE_SCHEMA)
