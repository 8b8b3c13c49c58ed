"""Parsing as the source does, in one call: tests and benches need it, the product not."""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa

from streaming.marks import mark_future
from streaming.parse import parse_messages


def parse_with_stamps(
    values: Sequence[bytes | None], kafka_us: Sequence[int | None], max_skew_us: int
) -> pa.RecordBatch:
    """Parse Kafka values and mark ``future`` rows against their message's Kafka timestamp."""
    parsed, index = parse_messages(values)
    stamps = pa.array(kafka_us, pa.int64()).take(pa.array(index))
    return mark_future(parsed, stamps, max_skew_us)
