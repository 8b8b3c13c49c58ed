"""What every parser hands on: a row per record (``PARSED_SCHEMA``): echo, hiccup or bad."""

from __future__ import annotations

import pyarrow as pa

PARSED_SCHEMA = pa.schema(
    [
        ("rtype", pa.string()),
        ("reason", pa.string()),
        ("cluster", pa.string()),
        ("topic", pa.string()),
        ("partition", pa.int64()),
        ("leader", pa.int64()),
        ("system", pa.string()),
        ("intended_us", pa.int64()),
        ("sent_us", pa.int64()),
        ("acked_us", pa.int64()),
        ("received_us", pa.int64()),
        ("lost", pa.bool_()),
        ("timeout_us", pa.int64()),
        ("max_us", pa.int64()),
    ]
)
EMPTY = pa.RecordBatch.from_pylist([], schema=PARSED_SCHEMA)


def concat(parts: list[pa.RecordBatch]) -> pa.RecordBatch:
    """Parsed batches as one (parsers work in bounded chunks)."""
    return pa.Table.from_batches(parts, schema=PARSED_SCHEMA).combine_chunks().to_batches()[0]
