"""Late marking: an echo is late once its *finest* window (from the spec) closed."""

from __future__ import annotations

import pyarrow as pa

from core.echo import Echo, encode_record
from core.windows import WindowSpec
from streaming.marks import SOURCE_SCHEMA, mark_late
from streaming.parse import parse_values

#: A minute boundary (µs).
T0 = 1_800_000_000_000_000 - 1_800_000_000_000_000 % 60_000_000


def _echo(intended_us: int) -> bytes:
    return encode_record(Echo("p", "c", "t", 0, 1, 0, 1, intended_us, intended_us, None, T0 * 2))


def _mark(values: list[bytes], windows: str, watermark_us: int) -> pa.RecordBatch:
    return mark_late(parse_values(values), WindowSpec.from_names(windows), watermark_us)


def test_late_is_judged_on_the_finest_window_of_the_spec() -> None:
    values = [_echo(T0 + 1), _echo(T0 + 9_999_999), _echo(T0 + 10_000_000), b"{bad"]
    watermark_us = T0 + 10_000_000  # the first 10 s window [T0, T0+10s) has just closed
    out = _mark(values, "10s,1m", watermark_us)
    assert out.schema == SOURCE_SCHEMA
    rows = out.to_pylist()
    assert [r["rtype"] for r in rows] == ["late", "late", "echo", "bad"]
    assert [r["event_us"] for r in rows] == [
        watermark_us,
        watermark_us,
        T0 + 10_000_000,
        watermark_us,
    ]
    assert [r["n"] for r in rows] == [1, 1, 1, 1]
    # the finest window decides: a 1 m one is still open, of 5 s ones only the first has closed
    rows_1m = _mark(values, "1m", watermark_us).to_pylist()
    assert [r["rtype"] for r in rows_1m] == ["echo", "echo", "echo", "bad"]
    rows_5s = _mark(values[:2], "5s,1m", T0 + 5_000_000).to_pylist()
    assert [r["rtype"] for r in rows_5s] == ["late", "echo"]
