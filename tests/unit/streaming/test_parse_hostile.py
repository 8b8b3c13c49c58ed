"""Any byte string on the echo topic is one counted row with a reason, never an exception."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.echo import (
    BAD_REASONS,
    MAX_ECHO_BYTES,
    MAX_ECHO_DEPTH,
    BadEcho,
    Echo,
    Hiccup,
    decode_record,
    encode_record,
    nesting_depth,
)
from core.echo_v2 import is_v2
from streaming.marks import mark_future
from streaming.parse import PARSED_SCHEMA, parse_values
from streaming.parse.v1_json import CHUNK

T0 = 1_800_000_000_000_000
GOOD = encode_record(Echo("p", "c", "t", 0, 1, 0, 10, T0, T0 + 1, T0 + 2, T0 + 3))
GOOD_HICCUP = encode_record(Hiccup("p", "c", T0, T0 + 5, 3, 4, 2))


def with_extra(raw: bytes, fragment: bytes) -> bytes:
    """The record with one more member, written verbatim (it may be anything)."""
    return raw[:-1] + b"," + fragment + b"}"


def nested(depth: int, kind: str = "[") -> bytes:
    if kind == "[":
        return b"[" * depth + b"1" + b"]" * depth
    return b'{"a":' * depth + b"1" + b"}" * depth


#: Hostile shapes, each a function of a good record: what a broken or malicious producer writes.
HOSTILE: list[Callable[[bytes], bytes | None]] = [
    lambda r: None,  # tombstone
    lambda r: r + b" " * (MAX_ECHO_BYTES - len(r) + 1),  # one byte over the cap
    lambda r: b"[" * 1000,
    lambda r: b"[" * 200_000,  # 200 KB of brackets: too large before too deep
    lambda r: nested(MAX_ECHO_DEPTH + 1),
    lambda r: with_extra(r, b'"x":' + nested(MAX_ECHO_DEPTH)),  # one level too deep in an extra
    lambda r: with_extra(r, b'"x":' + nested(MAX_ECHO_DEPTH - 1)),  # deep, but allowed
    lambda r: with_extra(r, b'"x":' + nested(5000, "{")),
    lambda r: r.replace(b'"p"', b'"\xff\xfe"'),  # bad UTF-8 in a field we read
    lambda r: with_extra(r, b'"x":"\xc3"'),  # bad UTF-8 in a field we ignore
    lambda r: r.replace(b'"c"', b'"\\ud800"'),  # a lone surrogate escape
    lambda r: with_extra(r, b'"x":NaN'),
    lambda r: with_extra(r, b'"x":-Infinity'),
    lambda r: r.replace(b'"seq":0', b'"seq":Infinity'),
    lambda r: with_extra(r, b'"seq":7'),  # a duplicated field we read
    lambda r: with_extra(r, b'"x":1,"x":2'),  # a duplicated field we ignore: harmless
    lambda r: with_extra(r, b'"intended\\u005fus":1800000000000009'),  # duplicate via an escape
    lambda r: r.replace(b'"seq":0', b'"seq":' + b"9" * 30),  # beyond 64 bits
    lambda r: r.replace(b'"seq":0', b'"seq":' + b"9" * 5000),  # beyond Python's int digits
    lambda r: with_extra(r, b'"x":' + b"9" * 40),
    lambda r: b"null",
    lambda r: b"[" + r + b"]",
    lambda r: b'"' + r.replace(b'"', b'\\"') + b'"',
    lambda r: b"12",
    lambda r: b"true",
    lambda r: b"",
    lambda r: b"\xef\xbb\xbf" + r,  # a UTF-8 byte order mark
    lambda r: r.decode().encode("utf-16"),
    lambda r: r + b"\n" + r,
    lambda r: b"  " + r + b"\t",
]
hostile = st.sampled_from(HOSTILE).flatmap(lambda f: st.sampled_from([GOOD, GOOD_HICCUP]).map(f))
any_value = st.one_of(
    st.none(),
    st.binary(max_size=200),
    st.text(max_size=100).map(str.encode),
    st.integers(0, 3000).map(lambda n: b"[" * n),
    st.integers(0, 3000).map(lambda n: b'{"a":' * n),
    st.integers(0, 3000).map(lambda n: with_extra(GOOD, b'"x":' + b"[" * n + b"]" * n)),
    st.builds(
        lambda a, b: GOOD[:a] + b + GOOD[a:], st.integers(0, len(GOOD)), st.binary(max_size=8)
    ),
    st.just(GOOD),
    hostile,
)


def reference_reason(raw: bytes | None) -> tuple[str, str | None]:
    """(rtype, reason) per ``decode_record``; int64 overflow is the parser's one extra rule."""
    try:
        rec = decode_record(raw)
    except BadEcho as exc:
        return "bad", exc.reason
    if any(
        isinstance(v, int) and abs(v) >= 2**63 for v in (getattr(rec, f) for f in rec.__slots__)
    ):
        return "bad", "bad_type"
    return ("hiccup" if isinstance(rec, Hiccup) else "echo"), None


# (a v2 batch is a row per record it holds: hostile v2 batches are fuzzed in test_parse_v2.py)
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(any_value.filter(lambda v: not is_v2(v)), min_size=1, max_size=30))
def test_any_bytes_are_exactly_one_row_each_with_the_reference_reason(
    values: list[bytes | None],
) -> None:
    batch = parse_values(values)
    assert batch.schema == PARSED_SCHEMA
    rows = batch.to_pylist()
    assert len(rows) == len(values)
    for raw, row in zip(values, rows, strict=True):
        assert row["rtype"] in ("echo", "hiccup", "bad")
        assert (row["rtype"] == "bad") == (row["reason"] is not None)
        assert row["reason"] is None or row["reason"] in BAD_REASONS
        assert (row["rtype"], row["reason"]) == reference_reason(raw), raw[:80] if raw else raw


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(any_value)
def test_decode_record_raises_only_bad_echo_with_a_known_reason(raw: bytes | None) -> None:
    try:
        decode_record(raw)
    except BadEcho as exc:
        assert exc.reason in BAD_REASONS


def at_stack_depth(frames: int, fn: Callable[[], Any]) -> Any:
    return fn() if frames == 0 else at_stack_depth(frames - 1, fn)


@pytest.mark.parametrize("depth", [MAX_ECHO_DEPTH, MAX_ECHO_DEPTH + 1, 500, 990, 5000])
def test_the_depth_verdict_does_not_depend_on_the_callers_stack(depth: int) -> None:
    raw = with_extra(GOOD, b'"x":' + nested(depth - 1))  # the record itself is one level
    want = "echo" if depth <= MAX_ECHO_DEPTH else "too_deep"
    headroom = sys.getrecursionlimit() - 150  # a parse of MAX_ECHO_DEPTH levels needs far less
    for frames in (0, headroom // 2, headroom):
        assert at_stack_depth(frames, lambda: reference_reason(raw)[1] or "echo") == want
        assert at_stack_depth(frames, lambda: parse_values([raw]).column("reason")[0].as_py()) == (
            None if want == "echo" else want
        )


def test_every_hostile_shape_has_its_reason() -> None:
    cases: list[tuple[str | None, bytes | None]] = [
        ("tombstone", None),
        ("too_large", b"{" + b" " * (10 * 1024 * 1024) + b"}"),  # 10 MB
        ("too_large", b"[" * (10 * 1024 * 1024)),
        ("too_deep", b"[" * 1000),
        ("too_deep", with_extra(GOOD, b'"x":' + nested(MAX_ECHO_DEPTH))),
        ("not_utf8", b"\xff\xfe"),
        ("not_utf8", with_extra(GOOD, b'"x":"\xc3"')),
        ("not_utf8", GOOD.replace(b'"c"', b'"\\udc00"')),
        ("non_finite", GOOD.replace(b'"seq":0', b'"seq":NaN')),
        ("non_finite", GOOD.replace(b'"sent_us":', b'"sent_us":-Infinity,"x":')),
        ("non_finite", GOOD.replace(b'"seq":0', b'"seq":1e999')),  # a float beyond double: inf
        (None, with_extra(GOOD, b'"x":[NaN,Infinity]')),  # lenient, like unknown fields
        ("duplicate_key", with_extra(GOOD, b'"intended_us":1800000000000009')),
        ("bad_type", GOOD.replace(b'"seq":0', b'"seq":' + b"9" * 30)),
        ("not_json", GOOD.replace(b'"seq":0', b'"seq":' + b"9" * 5000)),
        ("not_object", b"null"),
        ("not_object", b"[1,2]"),
        ("not_object", b'"echo"'),
        ("not_json", b""),
        (None, with_extra(GOOD, b'"x":1,"x":2')),  # ignored fields may repeat
        (None, with_extra(GOOD, b'"x":' + nested(MAX_ECHO_DEPTH - 1))),
        (None, GOOD + b" " * (MAX_ECHO_BYTES - len(GOOD))),  # exactly at the cap
    ]
    rows = parse_values([raw for _, raw in cases]).to_pylist()
    assert [r["reason"] for r in rows] == [reason for reason, _ in cases]
    for reason, raw in cases:  # the reference agrees (int64 overflow is the parser's own rule)
        assert reference_reason(raw) == (("echo", None) if reason is None else ("bad", reason))
    assert {r for r, _ in cases} - {None} <= set(BAD_REASONS)


def test_one_hostile_record_in_a_large_batch_spoils_nothing_else() -> None:
    good = [
        encode_record(Echo("p", "c", "t", i % 3, 1, i, 10, T0 + i, T0 + i, None, T0 + i + 7))
        for i in range(CHUNK + 10)
    ]
    values: list[bytes | None] = list(good)
    for i, f in zip(range(5, len(values), 97), HOSTILE, strict=False):
        values[i] = f(GOOD)
    rows = parse_values(values).to_pylist()
    assert len(rows) == len(values)
    for raw, row in zip(values, rows, strict=True):
        assert (row["rtype"], row["reason"]) == reference_reason(raw)
        if raw in good:
            assert row["received_us"] == json.loads(raw)["received_us"]


def test_nesting_depth_skips_strings_and_escapes() -> None:
    assert nesting_depth('{"a":[1,[2]]}') == 3
    assert nesting_depth('{"a":"[[[{{{"}') == 1
    assert nesting_depth('{"a":"\\"[[["}') == 1
    assert nesting_depth('["\\\\",[[1]]]') == 3
    assert nesting_depth("[" * 100_000) == 100_000


def test_an_event_time_too_far_ahead_of_the_kafka_timestamp_is_bad_future() -> None:
    skew_us = 300_000_000

    def at(seq: int, t_us: int) -> bytes:
        return encode_record(Echo("p", "c", "t", 0, 1, seq, 10, t_us, t_us, None, t_us + 9))

    values = [
        at(0, T0),  # on time
        at(1, T0 + skew_us),
        at(2, T0 + skew_us + 1),
        encode_record(Hiccup("p", "c", T0 + 3600_000_000, T0 + 3600_000_001, 1, 1, 1)),
        b"{not json",
        at(3, T0 + 10**12),
    ]
    kafka_us = pa.array([T0, T0, T0, T0, T0, None], pa.int64())  # None: no timestamp, trusted
    out = mark_future(parse_values(values), kafka_us, skew_us)
    assert out.schema == PARSED_SCHEMA
    rows = out.to_pylist()
    assert [(r["rtype"], r["reason"]) for r in rows] == [
        ("echo", None),
        ("echo", None),  # exactly at the bound
        ("bad", "future"),
        ("bad", "future"),  # a hiccup's start is event time too
        ("bad", "not_json"),
        ("echo", None),
    ]
    # nothing of a future row survives that could set an event time
    assert all(v is None for k, v in rows[2].items() if k not in ("rtype", "reason"))
    nothing_ahead = parse_values(values[:2])
    assert mark_future(nothing_ahead, pa.array([T0, T0], pa.int64()), skew_us) is nothing_ahead
