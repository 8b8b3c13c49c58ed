"""A body compressed by parts is one ordinary gzip member of the joined body, and a large part
that comes back as the same object is not compressed again."""

from __future__ import annotations

import gzip
import os
import zlib

from hypothesis import given, settings
from hypothesis import strategies as st

from core.gzip_parts import MIN_CACHED_BYTES, PartsGzip

#: a part: empty, small, or large (repetitive text and random bytes, as a body holds both)
parts_st = st.lists(
    st.one_of(
        st.binary(max_size=300),
        st.integers(MIN_CACHED_BYTES, 3 * MIN_CACHED_BYTES).map(lambda n: (b"x_total 1\n" * n)[:n]),
        st.integers(MIN_CACHED_BYTES, 2 * MIN_CACHED_BYTES).map(os.urandom),
    ),
    max_size=8,
)


def one_member(packed: bytes) -> bytes:
    """The body of ``packed``, checked to be a single gzip member with nothing after it."""
    reader = zlib.decompressobj(wbits=31)
    body = reader.decompress(packed) + reader.flush()
    assert reader.eof and reader.unused_data == b""
    return body


@settings(max_examples=40, deadline=None)
@given(parts_st, parts_st)
def test_each_body_is_one_gzip_member_of_its_parts_joined(
    first: list[bytes], second: list[bytes]
) -> None:
    packer = PartsGzip(6)
    for parts in (first, second, first + second):
        packed = packer.compress(parts)
        assert one_member(packed) == gzip.decompress(packed) == b"".join(parts)


def test_a_large_part_that_stays_the_same_object_is_compressed_once() -> None:
    packer = PartsGzip(6)
    big, other = b"a 1\n" * MIN_CACHED_BYTES, b"b 2\n" * MIN_CACHED_BYTES
    body = (b"# head\n", big, b"counters 1\n", other)
    assert one_member(packer.compress(body)) == b"".join(body)
    assert packer.compress(body) is packer.compress(body)  # the same body: the same gzip
    done = packer.deflated_bytes
    changed_big = b"c 3\n" * MIN_CACHED_BYTES
    nxt = (b"# head\n", changed_big, b"counters 2\n", other)  # ``other`` is the same object
    assert one_member(packer.compress(nxt)) == b"".join(nxt)
    assert packer.deflated_bytes - done == len(b"".join(nxt)) - len(other)
    assert packer.reused_bytes == len(other)
    # an equal but new object is compressed again: identity says "unchanged", not equality
    assert one_member(packer.compress((bytes(bytearray(other)),))) == other
    assert packer.reused_bytes == len(other)


def test_an_empty_body_and_a_plain_bytes_body() -> None:
    packer = PartsGzip(6)
    assert one_member(packer.compress(())) == b""
    body = b"x 1\n" * 10
    packed = packer.compress(body)
    assert one_member(packed) == body and packer.compress(body) is packed
