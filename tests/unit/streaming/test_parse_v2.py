"""The vectorised v2 decoder gives the rows v1 gives for the same records, with the reasons of
the reference ``core.echo_v2.decode_batch``, one row per record, in order, on any bytes."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from echo_batches import any_echo_rows, echo, good_batches, odd, raw_batch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.echo import BAD_REASONS, BadEcho, Echo, Hiccup, encode_record
from core.echo_v2 import ECHO_COLUMNS, MAGIC, decode_batch, encode_batch
from streaming.parse import PARSED_SCHEMA, parse_messages, parse_values
from testkit.parse import parse_with_stamps

T0 = 1_800_000_000_000_000
HICCUP = Hiccup("p1", "c", T0, T0 + 5, 3, 4, 2)
GOOD = encode_batch([echo(1), echo(2), HICCUP])


def v1_rows(records: list[Echo | Hiccup | BadEcho]) -> list[dict[str, Any]]:
    """The rows schema v1 gives for these records (a bad one: its reason, nothing else)."""
    rows = []
    for r in records:
        if isinstance(r, BadEcho):
            rows.append(
                {f.name: None for f in PARSED_SCHEMA} | {"rtype": "bad", "reason": r.reason}
            )
        else:
            rows.append(parse_values([encode_record(r)]).to_pylist()[0])
    return rows


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(good_batches(), min_size=1, max_size=5))
def test_good_batches_give_the_rows_of_the_same_records_in_v1(
    batches: list[list[Echo | Hiccup]],
) -> None:
    values = [encode_batch(b) for b in batches]
    parsed, index = parse_messages(values)
    assert parsed.schema == PARSED_SCHEMA
    want = [r for raw in values for r in v1_rows(decode_batch(raw))]
    assert parsed.to_pylist() == want
    assert index.tolist() == [i for i, raw in enumerate(values) for _ in decode_batch(raw)]


@st.composite
def hostile_batches(draw: Any) -> bytes:
    """A batch of arbitrary echo and hiccup columns, or arbitrary bytes after the magic."""
    if draw(st.integers(0, 4)) == 0:
        return MAGIC + draw(st.binary(max_size=120))
    if draw(st.booleans()):
        at, junk = draw(st.integers(4, len(GOOD))), draw(st.binary(min_size=1, max_size=8))
        return GOOD[:at] + junk + GOOD[at + len(junk) :]
    rows = draw(st.lists(any_echo_rows(), max_size=6))
    hics = draw(st.lists(st.tuples(odd, odd, odd, odd, odd), max_size=3))
    return raw_batch(
        [[c[k] for c, _ in rows] for k in ECHO_COLUMNS],
        [f for _, f in rows],
        [list(col) for col in zip(*hics, strict=True)] if hics else [],
    )


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        hostile_batches()
        | st.sampled_from([GOOD, encode_record(echo(3)), b"{not json", b"", None]),
        min_size=1,
        max_size=8,
    )
)
def test_any_mix_of_v1_and_hostile_v2_is_the_reference_row_by_row(
    values: list[bytes | None],
) -> None:
    parsed, index = parse_messages(values)
    want: list[dict[str, Any]] = []
    want_index: list[int] = []
    for i, raw in enumerate(values):
        rows = (
            v1_rows(decode_batch(raw))
            if raw and raw[:4] == MAGIC
            else parse_values([raw]).to_pylist()
        )
        want += rows
        want_index += [i] * len(rows)
    got = parsed.to_pylist()
    assert got == want
    assert index.tolist() == want_index
    assert {r["reason"] for r in got} - {None} <= set(BAD_REASONS)
    assert set(index.tolist()) == set(range(len(values)))  # every value is at least one row


def test_rows_keep_the_values_order_and_stamps_follow_their_message() -> None:
    ahead = T0 + 10**9
    late_clock = encode_batch(
        [echo(1, intended_us=ahead, sent_us=ahead, acked_us=None, received_us=ahead + 1), HICCUP]
    )
    values = [encode_record(echo(0)), encode_batch([echo(5), echo(6)]), late_clock, b"x"]
    stamps = [T0 // 1000 * 1000, T0, T0, None]
    rows = parse_with_stamps(values, stamps, max_skew_us=60_000_000).to_pylist()
    assert [(r["rtype"], r["reason"], r["intended_us"]) for r in rows] == [
        ("echo", None, T0),
        ("echo", None, T0 + 5),
        ("echo", None, T0 + 6),
        ("bad", "future", None),  # 1,000 s ahead of its message's timestamp
        ("hiccup", None, T0),
        ("bad", "not_json", None),
    ]


def test_a_thousand_batches_of_a_thousand_echoes() -> None:
    values = [encode_batch([echo(k * 1000 + i) for i in range(1000)]) for k in range(100)]
    parsed, index = parse_messages(values)
    assert parsed.num_rows == 100_000 and index[-1] == 99
    assert parsed.column("rtype").unique().to_pylist() == ["echo"]
    seq_like = pa.compute.subtract(parsed.column("intended_us"), T0).to_pylist()
    assert seq_like == list(range(100_000))
