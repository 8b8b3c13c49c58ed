"""Gap accounting: every offset of a range is read or counted, whatever order the records take."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from streaming.gaps import Gap, KafkaRange, RangeBook
from streaming.marks import SOURCE_SCHEMA, data_loss_row


def test_a_record_past_the_expected_offset_counts_the_gap_before_it() -> None:
    book = RangeBook([KafkaRange(0, 10, 20), KafkaRange(1, 5, 6)])
    assert book.pending() == 11
    assert book.arrive(0, 10) == (None, True)
    assert book.arrive(0, 14) == (Gap(0, 3), True)
    assert not book.wants(0, 12) and book.wants(0, 15)
    assert book.arrive(1, 5) == (None, True) and book.open == {0}
    assert book.skip_to(0, 12) is None  # retention behind us: nothing lost
    assert book.skip_to(0, 30) == Gap(0, 5) and not book.open


def test_a_record_past_the_end_closes_the_range_and_is_not_read() -> None:
    book = RangeBook([KafkaRange(3, 0, 4)])
    assert book.arrive(3, 9) == (Gap(3, 4), False)
    assert not book.open and book.pending() == 0


@given(
    st.integers(0, 50),
    st.integers(0, 50),
    st.lists(st.tuples(st.booleans(), st.integers(0, 120)), max_size=40),
)
def test_read_plus_counted_is_the_range(start: int, length: int, events: list) -> None:
    book = RangeBook([KafkaRange(0, start, start + length)])
    read = counted = 0
    for retention, offset in events:
        if retention:
            gap = book.skip_to(0, offset) if 0 in book.open else None
            counted += gap.offsets if gap else 0
        elif book.wants(0, offset):
            gap, inside = book.arrive(0, offset)
            counted += gap.offsets if gap else 0
            read += inside
    if 0 in book.open:  # the rest vanished
        gap = book.skip_to(0, start + length)
        counted += gap.offsets if gap else 0
    assert read + counted == length and not book.open


def test_the_gap_row_is_a_counted_source_row_at_the_watermark() -> None:
    row = data_loss_row("t", Gap(2, 7), 42)
    assert row.schema == SOURCE_SCHEMA
    (got,) = row.to_pylist()
    assert (got["rtype"], got["topic"], got["partition"], got["n"], got["event_us"]) == (
        "data_loss",
        "t",
        2,
        7,
        42,
    )
