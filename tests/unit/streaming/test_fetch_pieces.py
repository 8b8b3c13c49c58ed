"""A fetch is parsed in pieces of about ``PARSE_BYTES``: every record once, in order, with its
stamp and partition, whatever the sizes."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from streaming.consume import PARSE_BYTES, Fetched


@given(
    st.lists(st.one_of(st.none(), st.binary(max_size=40)), min_size=1, max_size=60),
    st.integers(1, 100),
)
def test_pieces_hold_every_record_once_in_order(values: list[bytes | None], limit: int) -> None:
    got = Fetched(values, list(range(len(values))), [i % 3 for i in range(len(values))])
    pieces = list(got.pieces(limit))
    assert [v for p in pieces for v in p.values] == values
    assert [t for p in pieces for t in p.kafka_us] == got.kafka_us
    assert [k for p in pieces for k in p.partitions] == got.partitions
    for p in pieces:
        assert p.values
        size = sum(len(v or b"") for v in p.values)
        # a piece ends at the record that reaches the limit, never later
        assert size - len(p.values[-1] or b"") < limit


def test_a_small_fetch_is_one_piece_and_a_v2_range_several() -> None:
    small = Fetched([b"x" * 300] * 10_000, [None] * 10_000, [0] * 10_000)  # v1: 3 MB
    assert [p is small for p in small.pieces()] == [True]
    v2 = Fetched([b"y" * 73_000] * 500, [1] * 500, [2] * 500)  # a read task's v2 fetch
    sizes = [len(p.values) for p in v2.pieces()]
    assert sum(sizes) == 500 and max(sizes) == -(-PARSE_BYTES // 73_000)
