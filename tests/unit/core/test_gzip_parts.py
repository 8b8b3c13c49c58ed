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


def test_a_primed_part_is_deflated_ahead_and_its_body_is_the_same_gzip() -> None:
    """``prime`` deflates a part before the body that holds it; that body then deflates only
    the rest, and its gzip is byte for byte what an unprimed compressor writes."""
    primed, plain = PartsGzip(6), PartsGzip(6)
    kept, coarse = b"a 1\n" * MIN_CACHED_BYTES, b"h 3\n" * MIN_CACHED_BYTES
    small = b"counters 1\n"
    body = (kept, small, b"b 2\n" * MIN_CACHED_BYTES)
    primed.compress(body)
    # the kept part and the small one are not deflated ahead: only the new large part
    assert primed.prime([kept, small, coarse]) == len(coarse) == primed.primed_bytes
    assert primed.prime([kept, coarse]) == 0  # primed already: not deflated again
    done = primed.deflated_bytes
    nxt = (kept, small, coarse)
    packed = primed.compress(nxt)
    assert packed == plain.compress(nxt) and one_member(packed) == b"".join(nxt)
    assert primed.deflated_bytes - done == len(small)  # the rest came from the kept and primed
    assert primed.reused_bytes == len(kept) + len(coarse)
    # a primed part that the next prime leaves out is let go: held parts stay bounded
    stale = b"s 4\n" * MIN_CACHED_BYTES
    primed.prime([stale])
    primed.prime([])
    done = primed.deflated_bytes
    primed.compress((stale,))
    assert primed.deflated_bytes - done == len(stale)
