"""An archive file's page headers checked against its footer, before pyarrow decodes a row group.

pyarrow sizes what it decodes by each page's own header, not by the footer: a file whose footer
declares 10 buckets in a column chunk whose pages hold millions is read whole (measured with
pyarrow 26, tests/unit/archive/test_archive_bounded_read.py). So the footer's caps
(``runtime.files``) bind only once the pages agree with it: each column chunk's pages must fill
exactly its declared byte range, hold exactly its declared number of values, and declare no more
uncompressed bytes in all than it does; and no page may declare more than
``MAX_ARCHIVE_PAGE_BYTES``, since a page is decoded whole. The headers are Thrift compact structs
(parquet.thrift's ``PageHeader``); only their integer fields are read, the rest skipped.
"""

from __future__ import annotations

import os

import pyarrow.parquet as pq

from runtime.files import MAX_ARCHIVE_PAGE_BYTES, KiB, MiB, size_text

#: A page header read at once, then grown to at most ``MAX_PAGE_HEADER_BYTES``; pyarrow writes
#: headers of a few dozen bytes (more only with statistics of long values).
_FIRST_READ_BYTES = 4 * KiB
#: The longest page header accepted (its statistics included).
MAX_PAGE_HEADER_BYTES = 1 * MiB
_NESTING = 8
# parquet.thrift: PageHeader fields and page types
_TYPE, _UNCOMPRESSED, _COMPRESSED, _DATA_V1, _DATA_V2 = 1, 2, 3, 5, 8
_DATA_PAGE, _DICTIONARY_PAGE, _DATA_PAGE_V2 = 0, 2, 3


class PageError(ValueError):
    """A column chunk whose pages disagree with its footer; the message is the reason."""


class _Short(Exception):
    """The header runs past the bytes read so far."""


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    out = shift = 0
    while True:
        if pos >= len(buf):
            raise _Short
        b = buf[pos]
        pos += 1
        out |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return out, pos
        if shift > 63:
            raise PageError("a page header holds a varint over 64 bits")


def _zigzag(buf: bytes, pos: int) -> tuple[int, int]:
    n, pos = _varint(buf, pos)
    return (n >> 1) ^ -(n & 1), pos


def _skip(buf: bytes, pos: int, kind: int, depth: int) -> tuple[object, int]:
    """(value, position after it) of a compact-protocol value: ints and structs kept, the rest
    skipped (None)."""
    if kind in (1, 2):  # bool in a struct field: its value is the type nibble
        return None, pos
    if kind == 3:
        return None, pos + 1
    if kind in (4, 5, 6):
        return _zigzag(buf, pos)
    if kind == 7:
        return None, pos + 8
    if kind == 8:
        n, pos = _varint(buf, pos)
        return None, pos + n
    if kind in (9, 10):
        if pos >= len(buf):
            raise _Short
        head, pos = buf[pos], pos + 1
        size, elem = head >> 4, head & 0x0F
        if size == 15:
            size, pos = _varint(buf, pos)
        for _ in range(size):
            if pos > len(buf):
                raise _Short
            if elem in (1, 2):
                pos += 1
            else:
                _, pos = _skip(buf, pos, elem, depth + 1)
        return None, pos
    if kind == 11:
        size, pos = _varint(buf, pos)
        if size:
            if pos >= len(buf):
                raise _Short
            types, pos = buf[pos], pos + 1
            for _ in range(size):
                for t in (types >> 4, types & 0x0F):
                    _, pos = _skip(buf, pos, t, depth + 1)
        return None, pos
    if kind == 12:
        return _struct(buf, pos, depth + 1)
    raise PageError(f"a page header holds an unknown Thrift type {kind}")


def _struct(buf: bytes, pos: int, depth: int) -> tuple[dict[int, object], int]:
    if depth > _NESTING:
        raise PageError(f"a page header nests deeper than {_NESTING} levels")
    fields: dict[int, object] = {}
    last = 0
    while True:
        if pos >= len(buf):
            raise _Short
        head, pos = buf[pos], pos + 1
        if head == 0:
            return fields, pos
        delta, kind = head >> 4, head & 0x0F
        if delta:
            fid = last + delta
        else:
            fid, pos = _zigzag(buf, pos)
        fields[fid], pos = _skip(buf, pos, kind, depth)
        last = fid
        if pos > len(buf):
            raise _Short


def _header(fd: int, offset: int, end: int) -> tuple[dict[int, object], int]:
    """The page header at ``offset`` (before ``end``) and its length in bytes."""
    size = _FIRST_READ_BYTES
    while True:
        buf = os.pread(fd, min(size, end - offset), offset)
        try:
            return _struct(buf, 0, 0)
        except _Short:
            if len(buf) >= end - offset:
                raise PageError("a page header runs past its column chunk") from None
            if size >= MAX_PAGE_HEADER_BYTES:
                raise PageError(f"a page header over {MAX_PAGE_HEADER_BYTES} bytes") from None
            size *= 4


def _int(fields: dict[int, object], fid: int) -> int:
    value = fields.get(fid)
    if not isinstance(value, int):
        raise PageError(f"a page header without its field {fid}")
    return value


def check_pages(fd: int, row_group: pq.RowGroupMetaData, columns: set[str]) -> None:
    """Raise PageError unless every column chunk of ``row_group`` whose top-level name is in
    ``columns`` has pages that agree with the footer (see the module)."""
    file_size = os.fstat(fd).st_size
    for c in range(row_group.num_columns):
        chunk = row_group.column(c)
        name = chunk.path_in_schema
        if name.split(".")[0] not in columns:
            continue
        start = chunk.data_page_offset
        if chunk.has_dictionary_page and chunk.dictionary_page_offset:
            start = min(start, chunk.dictionary_page_offset)
        end = start + chunk.total_compressed_size
        if start < 4 or end > file_size:
            raise PageError(f"{name}: pages at bytes {start}..{end}, outside the file")
        pos, values, uncompressed = start, 0, 0
        while pos < end:
            fields, length = _header(fd, pos, end)
            page_bytes, stored = _int(fields, _UNCOMPRESSED), _int(fields, _COMPRESSED)
            if page_bytes < 0 or stored < 0:
                raise PageError(f"{name}: a page declares a negative size")
            if page_bytes > MAX_ARCHIVE_PAGE_BYTES:  # pyarrow decodes a page whole
                cap = size_text(MAX_ARCHIVE_PAGE_BYTES)
                raise PageError(
                    f"{name}: a page declares {page_bytes} bytes, over its cap of {cap}"
                )
            uncompressed += page_bytes
            kind = _int(fields, _TYPE)
            if kind in (_DATA_PAGE, _DATA_PAGE_V2):
                data = fields.get(_DATA_V1 if kind == _DATA_PAGE else _DATA_V2)
                if not isinstance(data, dict):
                    raise PageError(f"{name}: a data page without its data header")
                n = _int(data, 1)
                if n < 0:
                    raise PageError(f"{name}: a page declares a negative count")
                values += n
            pos += length + stored
        if pos != end:
            raise PageError(f"{name}: pages end at byte {pos}, not {end} as the footer says")
        if values != chunk.num_values:
            raise PageError(
                f"{name}: pages hold {values} values, the footer says {chunk.num_values}"
            )
        if uncompressed > (declared := chunk.total_uncompressed_size):
            raise PageError(f"{name}: pages declare more than the footer's {declared} bytes")
