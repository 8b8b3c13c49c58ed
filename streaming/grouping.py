"""Dense integer codes of columns: how the reader groups rows without hashing every one.

A column becomes a code per row and a cardinality (``codes``, ``int_codes``, ``column_codes``);
several become one code (``key``, ``radix``), renumbered in order (``compact``); equal codes are
found by one sort (``runs``). The combiner's kernel (``streaming.combine``) and the series cap
(``streaming.admission``) both group this way.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

#: Counting instead of sorting (``_dense_groups``) may allocate this many slots (one per possible
#: group) per grouped element, plus ``DENSE_MIN_SLOTS``; past that (a backlog over many windows
#: and series) a sort groups instead, so memory stays a few times the rows'.
DENSE_SLOTS_PER_ELEMENT = 4
DENSE_MIN_SLOTS = 1 << 16


def dense_limit(elements: int) -> int:
    """Slots counting may allocate for ``elements`` grouped elements."""
    return DENSE_SLOTS_PER_ELEMENT * elements + DENSE_MIN_SLOTS


def int_codes(values: np.ndarray, limit: int) -> tuple[np.ndarray, int]:
    """Codes of ints by offset from the least when their range is small (no hash, no sort),
    dictionary codes otherwise."""
    if len(values) == 0:
        return np.zeros(0, np.int64), 1
    low, high = int(values.min()), int(values.max())
    if high - low < limit:
        return np.asarray(values, np.int64) - low, high - low + 1
    return codes(pa.array(values))


def column_codes(column: pa.Array | pa.ChunkedArray, limit: int) -> tuple[np.ndarray, int]:
    """``int_codes`` of an integer column (nulls: one more code), ``codes`` of any other."""
    if not pa.types.is_integer(column.type):
        return codes(column)
    values = np.asarray(pc.fill_null(column, 0).to_numpy(zero_copy_only=False), np.int64)
    coded, cards = int_codes(values, limit)
    if column.null_count:
        null = np.asarray(pc.is_null(column).to_numpy(zero_copy_only=False))
        return np.where(null, cards, coded), cards + 1
    return coded, cards


def key(parts: Sequence[tuple[np.ndarray, int]]) -> tuple[np.ndarray, int] | None:
    """One code for several, numbered 0..distinct-1 in mixed-radix order (None past 2**62)."""
    key, cards = parts[0]
    for codes, card in parts[1:]:
        if cards * max(card, 1) >= 2**62:
            return None
        key, cards = key * max(card, 1) + codes, cards * max(card, 1)
        if cards > len(key):
            key, cards = compact(key, cards)
    return compact(key, cards)


def compact(code: np.ndarray, cards: int) -> tuple[np.ndarray, int]:
    """Codes renumbered 0..distinct-1, their order kept: counted when few, else sorted."""
    if cards <= dense_limit(len(code)):
        used = np.bincount(code, minlength=cards) > 0
        rank = np.cumsum(used) - 1
        return rank[code], int(rank[-1]) + 1 if cards else 0
    unique, inverse = np.unique(code, return_inverse=True)
    return np.asarray(inverse, np.int64).reshape(-1), len(unique)


def codes(column: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, int]:
    """A dense code per row (nulls get their own) and how many distinct values there are.

    A column with one value in every row (a probe's cluster, topic, system) is found by one
    compare, not a hash per row."""
    if len(column) and column.null_count == 0 and pc.all(pc.equal(column, column[0])).as_py():
        return np.zeros(len(column), np.int64), 1
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    enc = pc.dictionary_encode(column, null_encoding="encode")
    return np.asarray(enc.indices.to_numpy(zero_copy_only=False), np.int64), len(enc.dictionary)


def radix(parts: Sequence[tuple[np.ndarray, int]]) -> tuple[np.ndarray, int] | None:
    """One code for several: mixed radix over their cardinalities (None past 2**62)."""
    key, cards = np.zeros(len(parts[0][0]), np.int64), 1
    for codes, card in parts:
        cards *= max(card, 1)
        if cards >= 2**62:
            return None
        key = key * max(card, 1) + codes
    return key, cards


def runs(key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The order that sorts ``key`` and where each run of equal keys starts in it."""
    order = np.argsort(key, kind="stable")
    sorted_key = key[order]
    first = np.flatnonzero(np.concatenate(([True], sorted_key[1:] != sorted_key[:-1])))
    return order, first
