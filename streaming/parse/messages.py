"""Kafka values to parsed rows: each value to its format's parser, rows in the values' order."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from core.echo_v2 import is_v2
from streaming.parse.rows import PARSED_SCHEMA, concat
from streaming.parse.v1_json import parse_json
from streaming.parse.v1_template import TEMPLATE_CHUNK, template_rows
from streaming.parse.v2 import parse_v2


def parse_values(values: Sequence[bytes | None]) -> pa.RecordBatch:
    """The parsed rows of Kafka values, in order; bad records carry the reference's reason.

    A v1 value is one row; a v2 batch is one row per record it holds (echoes, then hiccups), or
    one ``bad`` row when its header or size is wrong. Never raises on any input: a null value
    (tombstone), oversize, non-UTF-8 or hostile JSON, a hostile v2 batch, is a ``bad`` row.
    """
    return parse_messages(values)[0]


def parse_messages(values: Sequence[bytes | None]) -> tuple[pa.RecordBatch, npt.NDArray[np.int64]]:
    """``parse_values``, and for each row the index of the value it came from."""
    v2 = list(map(is_v2, values))
    if not any(v2):
        return parse_v1(values), np.arange(len(values), dtype=np.int64)
    if all(v2):
        return parse_v2(values)  # type: ignore[arg-type]
    # a mix: parse each kind apart, then put the rows back in the values' order
    v1_at = np.array([i for i, x in enumerate(v2) if not x], dtype=np.int64)
    v2_at = np.array([i for i, x in enumerate(v2) if x], dtype=np.int64)
    v1_rows = parse_v1([values[i] for i in v1_at])
    v2_rows, v2_index = parse_v2([values[i] for i in v2_at])  # type: ignore[misc]
    source = np.concatenate([v1_at, v2_at[v2_index]])
    order = np.argsort(source, kind="stable")
    both = pa.Table.from_batches([v1_rows, v2_rows], schema=PARSED_SCHEMA).take(order)
    return both.combine_chunks().to_batches()[0], source[order]


def parse_v1(values: Sequence[bytes | None]) -> pa.RecordBatch:
    """Schema-v1 values: the probes' own layout with numpy (``v1_template``), any other record
    through Arrow's JSON reader and the reference (``v1_json``)."""
    if len(values) > TEMPLATE_CHUNK:
        parts = [
            parse_v1(values[i : i + TEMPLATE_CHUNK]) for i in range(0, len(values), TEMPLATE_CHUNK)
        ]
        return concat(parts)
    fast, taken = template_rows(values)
    if taken.all():
        return fast
    rest_at = np.flatnonzero(~taken)
    rest = parse_json([values[i] for i in rest_at.tolist()])
    if not taken.any():
        return rest
    order = np.argsort(np.concatenate([np.flatnonzero(taken), rest_at]), kind="stable")
    both = pa.Table.from_batches([fast, rest], schema=PARSED_SCHEMA).take(order)
    return both.combine_chunks().to_batches()[0]
