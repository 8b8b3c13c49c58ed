"""The source's late marking: an echo is late once its *finest* window (from the spec) closed."""

from __future__ import annotations

from core.echo import Echo, encode_record
from core.windows import WindowSpec
from streaming.parse import parse_values
from streaming.source import SOURCE_SCHEMA, KafkaEchoReader

#: A minute boundary (µs).
T0 = 1_800_000_000_000_000 - 1_800_000_000_000_000 % 60_000_000


def _echo(intended_us: int) -> bytes:
    return encode_record(Echo("p", "c", "t", 0, 1, 0, 1, intended_us, intended_us, None, T0 * 2))


def _reader(windows: str) -> KafkaEchoReader:
    return KafkaEchoReader({"bootstrap": "x:1", "topic": "t", "windows": windows})


def test_late_is_judged_on_the_finest_window_of_the_spec() -> None:
    values = [_echo(T0 + 1), _echo(T0 + 9_999_999), _echo(T0 + 10_000_000), b"{bad"]
    watermark_us = T0 + 10_000_000  # the first 10 s window [T0, T0+10s) has just closed
    out = _reader(WindowSpec.from_names("10s,1m").to_option())._mark(
        parse_values(values), watermark_us
    )
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
    rows_1m = _reader("1m")._mark(parse_values(values), watermark_us).to_pylist()
    assert [r["rtype"] for r in rows_1m] == ["echo", "echo", "echo", "bad"]
    rows_5s = _reader("5s,1m")._mark(parse_values(values[:2]), T0 + 5_000_000).to_pylist()
    assert [r["rtype"] for r in rows_5s] == ["late", "echo"]
