"""Schema v1 in the probes' own layout, read with numpy: no JSON parser.

A record written by ``core.echo.encode_record`` (the reference decoder, ``decode_record``, reads
it back) is fixed runs of bytes with values between them. The runs and where each value lies are
derived here at import time by encoding a sample ``Echo``: its field order is a wire contract
(``Echo``'s docstring), and a change of it moves this path with it. A record is taken only if it
is that layout byte for byte and passes every check; any other is left to ``v1_json``.

Why a second v1 parser: v1 is no longer the default, but a v1 backlog (an older probe's topic,
read from the start) parses several times faster here than through Arrow's JSON reader
(docs/benchmarks.md, schema-v1 parse; ``python -m bench.parse_v1``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import fields, replace

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from core.echo import (
    DEFAULT_SYSTEM,
    MAX_EPOCH_US,
    MIN_EPOCH_US,
    SYSTEMS,
    Echo,
    encode_record,
)
from core.labels import MAX_LABEL_BYTES
from streaming.parse.rows import EMPTY, PARSED_SCHEMA

#: Records the template path reads at once (its scratch arrays are ~600 bytes a record).
TEMPLATE_CHUNK = 16_384


def _runs(quote: int, delta: int, text: bytes) -> list[tuple[int, int, int, int]]:
    """``text`` at ``q[quote] + delta`` as 8-byte words: (quote, offset, word, mask) each."""
    out = []
    for at in range(0, len(text), 8):
        piece = text[at : at + 8]
        if len(piece) < 8 and len(text) >= 8:  # the last word overlaps the one before it
            at, piece = len(text) - 8, text[-8:]
        mask = (1 << (8 * len(piece))) - 1
        out.append((quote, delta + at, int.from_bytes(piece, "little"), mask))
    return out


#: The fields the template path reads no value of: a v1 echo's (``Echo``'s defaults), written
#: as fixed bytes; ``system`` is written only when not kafka.
_CONSTANT = ("v", "type")


def _layout(record: bytes) -> tuple[list[tuple[int, int, bytes]], list[tuple[str, int]]]:
    """The fixed runs of an encoded echo and where each value lies between them.

    Runs are (quote, offset, bytes): each starts at the record's ``quote``-th quote plus
    ``offset``, and together they cover every byte that is not a value, so a record that has
    them all, its values in between, is that layout exactly. Values are (field, quote): a string
    value sits between quotes ``quote`` and ``quote + 1``; a number (quote -1) between two runs.
    """
    body = record[1:-1]  # inside the braces
    quotes = [i for i, b in enumerate(body) if b == ord('"')]
    runs: list[tuple[int, int, bytes]] = []
    values: list[tuple[str, int]] = []
    at = 0
    for name in _ENCODED_FIELDS:
        key = b'"' + name.encode() + b'":'
        start = body.index(key, at) + len(key)
        if name in _CONSTANT:
            continue  # part of the run that follows
        string = body[start : start + 1] == b'"'
        end = body.index(b'"', start + 1) + 1 if string else start
        while not string and end < len(body) and body[end : end + 1] not in b",}":
            end += 1
        runs.append((at, start + string, body[at : start + string]))
        values.append((name, quotes.index(start) if string else -1))
        at = end - string
    runs.append((at, len(body), body[at:]))

    def anchored(run: tuple[int, int, bytes]) -> tuple[int, int, bytes]:
        first = next(i for i, q in enumerate(quotes) if q >= run[0])
        return (first, run[0] - quotes[first], run[2])

    return [anchored(run) for run in runs], values


#: ``Echo``'s fields in the order ``encode_record`` writes them (a wire contract: see ``Echo``),
#: but ``system``: written last, and only when not kafka.
_ENCODED_FIELDS = tuple(f.name for f in fields(Echo) if f.name != "system")
_SAMPLE = Echo("p", "c", "t", 0, 0, 0, 0, 0, 0, 0, 0, lost=False, timeout_us=0)
_HEAD, _VALUES = _layout(encode_record(_SAMPLE))
#: Quotes of a record without and with ``system``, and the run that starts the system's value.
_QUOTES = encode_record(_SAMPLE).count(b'"')
_SYSTEM_RECORD = encode_record(replace(_SAMPLE, system="nats"))
_QUOTES_SYSTEM = _SYSTEM_RECORD.count(b'"')
_SYSTEM_TEXT = _SYSTEM_RECORD[len(encode_record(_SAMPLE)) - 2 : _SYSTEM_RECORD.index(b"nats")]
#: The string values' opening quotes, and the numbers (``lost`` too) in the order written.
_LABEL_QUOTE = {name: quote for name, quote in _VALUES if quote >= 0}
_NUMBERS = tuple(name for name, quote in _VALUES if quote < 0)
#: Runs that end right before a number, and those that start right after one.
_BEFORE_NUMBER = [run for run, (_, quote) in zip(_HEAD, _VALUES, strict=False) if quote < 0]
_AFTER_NUMBER = [_HEAD[i + 1] for i, (_, quote) in enumerate(_VALUES) if quote < 0]
_WORDS = [w for run in _HEAD for w in _runs(*run)]
_WORD_QUOTE = np.array([w[0] for w in _WORDS])
_WORD_OFFSET = np.array([w[1] for w in _WORDS], np.int64)
_WORD_VALUE = np.array([w[2] for w in _WORDS], np.uint64)
_WORD_MASK = np.array([w[3] for w in _WORDS], np.uint64)
_SYSTEM_RUN = _runs(_QUOTES - 1, 0, _SYSTEM_TEXT)
#: Bytes after the last record, so that a word (8 bytes) can be read up to 32 bytes past any quote.
_PAD = 40
assert len(_SYSTEM_RUN) == 2 and all(off + len(text) <= _PAD - 8 for _, off, text in _HEAD)
#: Longest integer read here (18 digits always fit int64); a longer one goes to the other path.
_MAX_DIGITS = 18
#: The longest record of that layout: its fixed runs, the longest labels and system, 10 numbers.
_MAX_LAYOUT_BYTES = (
    sum(len(run[2]) for run in _HEAD) + len(_SYSTEM_TEXT) + 2 + sum(MAX_LABEL_BYTES.values())
    + max(map(len, SYSTEMS)) + len(_NUMBERS) * _MAX_DIGITS
)  # fmt: skip


def _words(buf: npt.NDArray[np.uint8]) -> npt.NDArray[np.uint64]:
    """Every 8 bytes of ``buf`` as a little-endian word, word ``p`` at byte ``p`` (no copy)."""
    return np.ndarray((len(buf) - 7,), "<u8", buffer=buf, strides=(1,))


def _strings(data: pa.Buffer, start: npt.NDArray[np.int64], end: npt.NDArray[np.int64]) -> pa.Array:
    """``data[start:end]`` row by row (non-decreasing, printable ASCII) as a large string array."""
    bounds = np.empty(2 * len(start), np.int64)
    bounds[0::2], bounds[1::2] = start, end
    every = pa.Array.from_buffers(
        pa.large_string(), len(bounds) - 1, [None, pa.py_buffer(bounds), data]
    )
    return every.take(pa.array(np.arange(0, len(bounds), 2)))


def template_rows(values: Sequence[bytes | None]) -> tuple[pa.RecordBatch, npt.NDArray[np.bool_]]:
    """The echoes among ``values`` laid out exactly as the probes write them, and which those are.

    A record is taken only if it is that layout byte for byte (keys in order, no spaces, no
    escapes, printable ASCII, plain integers) and passes every schema-v1 check: a JSON object
    the reference reads the same values from and accepts. Any other is left to ``v1_json``.
    """
    n = len(values)
    # padded: a word is read up to _PAD bytes past a quote
    arr = pa.array([*values, bytes(_PAD)], pa.large_binary())
    offsets = np.frombuffer(arr.buffers()[1], np.int64, n + 1)
    long = np.flatnonzero(np.diff(offsets) > _MAX_LAYOUT_BYTES)
    if len(long):  # never scanned here: the scratch arrays stay bounded whatever arrives
        blank = set(long.tolist())
        kept = [b"" if i in blank else v for i, v in enumerate(values)]
        arr = pa.array([*kept, bytes(_PAD)], pa.large_binary())
        offsets = np.frombuffer(arr.buffers()[1], np.int64, n + 1)
    size = int(offsets[-1])
    taken = np.zeros(n, np.bool_)
    if size == 0:
        return EMPTY, taken
    buf = np.frombuffer(arr.buffers()[2], np.uint8, size + _PAD)
    body = buf[:size]
    first, last = offsets[:-1], offsets[1:]
    # a null (tombstone) or a long record is empty here: no quotes, left to the other path
    ok = np.ones(n, np.bool_)
    # a control, non-ASCII or escape byte in a record: the other path decides
    if body.min() < 0x20 or body.max() > 0x7E or (body == 0x5C).any():
        odd = np.flatnonzero((body < 0x20) | (body > 0x7E) | (body == 0x5C))
        ok[np.searchsorted(offsets, odd, side="right") - 1] = False
    quote = np.flatnonzero(body == 0x22)
    at_quote = np.searchsorted(quote, offsets)
    count = np.diff(at_quote)
    ok &= (count == _QUOTES) | (count == _QUOTES_SYSTEM)
    rows = np.flatnonzero(ok)
    if not len(rows):
        return EMPTY, taken
    first, last = first[rows], last[rows]
    with_system = count[rows] == _QUOTES_SYSTEM
    if len(rows) == n and len(quote) == n * _QUOTES:  # the usual batch: no system, all taken
        q = quote.reshape(n, _QUOTES)  # q[:, i]: the i-th quote of each record
    else:
        q = quote[at_quote[rows][:, None] + np.arange(_QUOTES)]
    words = _words(buf)
    at = np.take(q, _WORD_QUOTE, axis=1)
    at += _WORD_OFFSET
    found = words[at]
    found &= _WORD_MASK
    good = (found == _WORD_VALUE).all(axis=1)
    good &= (buf[first] == ord("{")) & (q[:, 0] == first + 1) & (buf[last - 1] == ord("}"))
    # then "} or ","system":"<name>"}
    tail = np.flatnonzero(with_system)
    end_quote = q[:, _QUOTES - 1]
    if len(tail):
        qs = quote[at_quote[rows[tail]][:, None] + np.arange(_QUOTES, _QUOTES_SYSTEM)]
        head = q[tail, _QUOTES - 1]
        good[tail] &= (words[head] == _SYSTEM_RUN[0][2]) & (
            (words[head + _SYSTEM_RUN[1][1]] & _SYSTEM_RUN[1][3]) == _SYSTEM_RUN[1][2]
        )
        end_quote = end_quote.copy()
        end_quote[tail] = qs[:, -1]
    good &= end_quote == last - 2
    # the numbers: between the end of one run and the start of the next
    run_end = np.stack([q[:, r[0]] + r[1] + len(r[2]) for r in _BEFORE_NUMBER], axis=1)
    run_start = np.stack([q[:, r[0]] + r[1] for r in _AFTER_NUMBER], axis=1)
    length = run_start - run_end
    good &= (length > 0).all(axis=1) & (length <= _MAX_DIGITS).all(axis=1)
    if not good.any():
        return EMPTY, taken
    if not good.all():
        rows, q, first, last = rows[good], q[good], first[good], last[good]
        run_end, run_start, length = run_end[good], run_start[good], length[good]
        with_system = with_system[good]
    m = len(rows)
    text = _strings(arr.buffers()[2], run_end.ravel(), run_start.ravel())
    lead = buf[run_end]
    is_null = (length == 4) & ((words[run_end] & 0xFFFFFFFF) == int.from_bytes(b"null", "little"))
    lost_at = _NUMBERS.index("lost")
    lost = (length[:, lost_at] == 4) & (
        (words[run_end[:, lost_at]] & 0xFFFFFFFF) == int.from_bytes(b"true", "little")
    )
    lost_ok = lost | (length[:, lost_at] == 5) & (
        (words[run_end[:, lost_at]] & 0xFFFFFFFFFF) == int.from_bytes(b"false", "little")
    )
    leader_at = _NUMBERS.index("leader")
    no_leader = (length[:, leader_at] == 2) & (
        (words[run_end[:, leader_at]] & 0xFFFF) == int.from_bytes(b"-1", "little")
    )
    decimal = pc.ascii_is_decimal(text).to_numpy(zero_copy_only=False).reshape(m, len(_NUMBERS))
    is_int = decimal & ((lead != ord("0")) | (length == 1))
    valid = pa.py_buffer(np.packbits(is_int.ravel(), bitorder="little"))
    ints = pa.Array.from_buffers(
        pa.large_string(), m * len(_NUMBERS), [valid, *text.buffers()[1:]]
    ).cast(pa.int64())
    value = np.frombuffer(ints.buffers()[1], np.int64, m * len(_NUMBERS)).reshape(m, -1)
    col = {name: value[:, i] for i, name in enumerate(_NUMBERS)}
    null = {name: is_null[:, i] for i, name in enumerate(_NUMBERS)}
    nullable = np.array([name in ("acked_us", "received_us", "timeout_us") for name in _NUMBERS])
    fine = is_int | (is_null & nullable)
    fine[:, lost_at] = lost_ok
    fine[:, leader_at] |= no_leader
    col["leader"] = np.where(no_leader, -1, col["leader"])
    good = fine.all(axis=1)
    # the schema's checks, as _fast_ok's; anything short of certainly good goes to the other path
    for name, i in _LABEL_QUOTE.items():
        good &= q[:, i + 1] - q[:, i] - 1 <= MAX_LABEL_BYTES[name]
    intended = col["intended_us"]
    for name in ("intended_us", "sent_us", "acked_us", "received_us"):
        t = col[name]
        good &= (t >= MIN_EPOCH_US) & (t <= MAX_EPOCH_US) & (t >= intended) | null[name]
    good &= ~null["intended_us"] & ~null["sent_us"]
    good &= np.where(lost, ~null["timeout_us"], ~null["received_us"])
    system = pa.repeat(pa.scalar(DEFAULT_SYSTEM, pa.large_string()), m)
    tail = np.flatnonzero(with_system)
    if len(tail):
        qs = quote[at_quote[rows[tail]][:, None] + np.arange(_QUOTES, _QUOTES_SYSTEM)]
        named = _strings(arr.buffers()[2], qs[:, 2] + 1, qs[:, 3])
        good[tail] &= pc.is_in(named, pa.array(SYSTEMS, pa.large_string())).to_numpy(
            zero_copy_only=False
        )
        where = np.zeros(m, np.int64)
        where[tail] = np.arange(len(tail))
        system = pc.if_else(pa.array(with_system), named.take(pa.array(where)), system)
    taken[rows[good]] = True
    if not good.any():
        return EMPTY, taken
    every = good.all()
    g = pa.array(good)

    def keep(a: pa.Array) -> pa.Array:
        return a if every else a.filter(g)

    def label(i: int) -> pa.Array:
        return keep(_strings(arr.buffers()[2], q[:, i] + 1, q[:, i + 1])).cast(pa.string())

    def num(name: str) -> pa.Array:
        return keep(pa.array(col[name], mask=null[name] if null[name].any() else None))

    k = int(good.sum())
    out = pa.RecordBatch.from_arrays(
        [
            pa.repeat(pa.scalar("echo"), k),
            pa.nulls(k, pa.string()),
            label(_LABEL_QUOTE["cluster"]),
            label(_LABEL_QUOTE["topic"]),
            num("partition"),
            num("leader"),
            keep(system).cast(pa.string()),
            num("intended_us"),
            num("sent_us"),
            num("acked_us"),
            num("received_us"),
            keep(pa.array(lost)),
            num("timeout_us"),
            pa.nulls(k, pa.int64()),
        ],
        schema=PARSED_SCHEMA,
    )
    return out, taken
