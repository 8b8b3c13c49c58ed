"""The codec: HdrHistogram's compressed encoding round-trips our buckets exactly, both ways."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hdrh.histogram import HdrHistogram
from hypothesis import given, settings
from hypothesis import strategies as st

from core.hdr import HdrLayout, SparseHistogram
from core.hdr_codec import decode, encode, from_hdrh, to_hdrh

LAYOUT = HdrLayout()
DATA = Path(__file__).parents[2] / "data"


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=LAYOUT.highest_us), min_size=1, max_size=200))
def test_encode_then_decode_keeps_every_bucket(values: list[int]) -> None:
    h = SparseHistogram.from_values(LAYOUT, values)
    back = decode(encode(h), LAYOUT)
    assert np.array_equal(back.index, h.index)
    assert np.array_equal(back.count, h.count)
    assert back.max_us == LAYOUT.highest_value_at(h.index[-1])  # what the encoding can carry


def test_known_good_encoding_decodes_into_our_buckets() -> None:
    encoded = (DATA / "known_good_histogram.txt").read_text().strip()
    got = decode(encoded, LAYOUT)
    want = SparseHistogram.from_values(LAYOUT, range(1, 10_001))
    assert np.array_equal(got.index, want.index)
    assert np.array_equal(got.count, want.count)
    assert encode(want).decode() == encoded  # our encoder writes the artefact byte for byte


def test_to_hdrh_agrees_with_recording_into_hdrh() -> None:
    values = [1, 5, 100, 100, 123_456, 3_000_000]
    ref = HdrHistogram(1, LAYOUT.highest_us, 3)
    for v in values:
        ref.record_value(v)
    ours = to_hdrh(SparseHistogram.from_values(LAYOUT, values))
    for p in (50, 90, 99.9, 100):
        assert ours.get_value_at_percentile(p) == ref.get_value_at_percentile(p)
    assert from_hdrh(ref, LAYOUT).total == len(values)


def test_from_hdrh_refuses_another_layout() -> None:
    with pytest.raises(ValueError, match="layout"):
        from_hdrh(HdrHistogram(1, LAYOUT.highest_us, 2), LAYOUT)


def to_hdrh_by_recording(hist: SparseHistogram) -> HdrHistogram:
    """The implementation ``to_hdrh`` replaced (one ``record_value`` per bucket): the reference."""
    layout = hist.layout
    h = HdrHistogram(layout.lowest_us, layout.highest_us, layout.digits)
    in_range = hist.index < layout.overflow_index
    for i, c in zip(hist.index[in_range], hist.count[in_range], strict=True):
        h.record_value(int(layout.lowest_value_at(int(i))), int(c))
    return h


@settings(max_examples=100, deadline=None)
@given(
    st.sampled_from([HdrLayout(), HdrLayout(digits=2), HdrLayout(digits=4), HdrLayout(digits=1)]),
    st.lists(st.integers(min_value=0, max_value=2**40), max_size=400),
)
def test_to_hdrh_is_the_same_as_recording_bucket_by_bucket(
    layout: HdrLayout, values: list[int]
) -> None:
    """Byte for byte the encoding of before, and the same state (overflow and empty included)."""
    hist = SparseHistogram.from_values(layout, values)
    ours, ref = to_hdrh(hist), to_hdrh_by_recording(hist)
    assert ours.encode() == ref.encode()
    assert (ours.total_count, ours.min_value, ours.max_value) == (
        ref.total_count,
        ref.min_value,
        ref.max_value,
    )
    assert bytes(ours.counts) == bytes(ref.counts)
