"""A Parquet footer edited in place: hostile archive files that declare what pyarrow never writes.

A footer is Thrift's compact protocol (parquet.thrift's ``FileMetaData``). ``decode`` turns it
into plain values (a struct is ``{field id: (type, value)}``, a list ``(element type, [values])``),
``encode`` writes them back, and ``rewrite`` edits a file's footer with a function of that tree.
Only what parquet.thrift uses is handled (no maps); field ids used below are parquet.thrift's.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

STOP, TRUE, FALSE, I8, I16, I32, I64, DOUBLE, BINARY, LIST, SET, MAP, STRUCT = range(13)
#: parquet.thrift field ids: FileMetaData.row_groups, RowGroup.columns / total_byte_size /
#: num_rows, ColumnChunk.meta_data, ColumnMetaData.path_in_schema / num_values /
#: total_uncompressed_size.
ROW_GROUPS, COLUMNS, TOTAL_BYTE_SIZE, NUM_ROWS, META_DATA = 4, 1, 2, 3, 3
PATH_IN_SCHEMA, NUM_VALUES, TOTAL_UNCOMPRESSED_SIZE = 3, 5, 6

Struct = dict[int, tuple[int, Any]]


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def byte(self) -> int:
        self.pos += 1
        return self.data[self.pos - 1]

    def varint(self) -> int:
        shift = out = 0
        while True:
            b = self.byte()
            out |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                return out

    def zigzag(self) -> int:
        n = self.varint()
        return (n >> 1) ^ -(n & 1)

    def value(self, kind: int) -> Any:
        if kind in (TRUE, FALSE):
            return kind == TRUE
        if kind == I8:
            return struct.unpack("b", bytes([self.byte()]))[0]
        if kind in (I16, I32, I64):
            return self.zigzag()
        if kind == DOUBLE:
            self.pos += 8
            return struct.unpack("<d", self.data[self.pos - 8 : self.pos])[0]
        if kind == BINARY:
            n = self.varint()
            self.pos += n
            return self.data[self.pos - n : self.pos]
        if kind in (LIST, SET):
            head = self.byte()
            size, elem = head >> 4, head & 0x0F
            if size == 15:
                size = self.varint()
            if elem in (TRUE, FALSE):  # a bool inside a collection is one byte
                return (elem, [self.byte() == TRUE for _ in range(size)])
            return (elem, [self.value(elem) for _ in range(size)])
        if kind == STRUCT:
            out: Struct = {}
            last = 0
            while (head := self.byte()) != STOP:
                delta, ftype = head >> 4, head & 0x0F
                fid = last + delta if delta else self.zigzag()
                out[fid] = (ftype, self.value(ftype))
                last = fid
            return out
        raise ValueError(f"thrift type {kind} is not in parquet.thrift's footer")


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        if n < 0x80:
            return bytes(out + bytes([n]))
        out.append((n & 0x7F) | 0x80)
        n >>= 7


def _zigzag(n: int) -> bytes:
    return _varint((n << 1) ^ (n >> 63))


def _encode(kind: int, value: Any) -> bytes:
    if kind in (TRUE, FALSE):
        return b""  # a struct field's bool is its type nibble
    if kind == I8:
        return struct.pack("b", value)
    if kind in (I16, I32, I64):
        return _zigzag(value)
    if kind == DOUBLE:
        return struct.pack("<d", value)
    if kind == BINARY:
        return _varint(len(value)) + value
    if kind in (LIST, SET):
        elem, items = value
        head = bytes([len(items) << 4 | elem]) if len(items) < 15 else bytes([0xF0 | elem])
        size = b"" if len(items) < 15 else _varint(len(items))
        if elem in (TRUE, FALSE):
            return head + size + bytes(TRUE if v else FALSE for v in items)
        return head + size + b"".join(_encode(elem, v) for v in items)
    if kind == STRUCT:
        out, last = bytearray(), 0
        for fid in sorted(value):
            ftype, v = value[fid]
            if ftype in (TRUE, FALSE):
                ftype = TRUE if v else FALSE
            if 0 < fid - last <= 15:
                out.append((fid - last) << 4 | ftype)
            else:
                out += bytes([ftype]) + _zigzag(fid)
            out += _encode(ftype, v)
            last = fid
        return bytes(out + bytes([STOP]))
    raise ValueError(f"thrift type {kind}")


def decode(footer: bytes) -> Struct:
    """A footer's FileMetaData as plain values."""
    value: Struct = _Reader(footer).value(STRUCT)
    return value


def encode(meta: Struct) -> bytes:
    """FileMetaData back to its compact-protocol bytes."""
    return _encode(STRUCT, meta)


def rewrite(path: Path, edit: Callable[[Struct], None]) -> None:
    """Edit the footer of the Parquet file at ``path`` in place (its pages are left as they are)."""
    data = path.read_bytes()
    size = int.from_bytes(data[-8:-4], "little")
    meta = decode(data[-8 - size : -8])
    edit(meta)
    footer = encode(meta)
    path.write_bytes(data[: -8 - size] + footer + len(footer).to_bytes(4, "little") + b"PAR1")


def chunks(meta: Struct, group: int = 0) -> dict[str, Struct]:
    """Row group ``group``'s ColumnMetaData by dotted column path (to edit in place)."""
    row_group = meta[ROW_GROUPS][1][1][group]
    out = {}
    for chunk in row_group[COLUMNS][1][1]:
        cmd = chunk[META_DATA][1]
        out[".".join(p.decode() for p in cmd[PATH_IN_SCHEMA][1][1])] = cmd
    return out
