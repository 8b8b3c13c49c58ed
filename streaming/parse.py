"""Parse and validate echo records, vectorised with pyarrow; exact reasons from the reference.

Schema v1 (one JSON echo per Kafka message): the fast path parses a whole batch natively and
accepts only rows that pass every schema-v1 check; any row it does not accept is re-checked by
``core.echo.decode_record``, so the reason a bad record is counted under is always the reference
parser's. Format v2 (a batch of echoes per message, ``core.echo_v2``): each batch's header is
checked in Python, its columns are read with numpy and validated all at once, with the reasons
and check order of ``core.echo_v2.decode_batch`` (the tests hold them equal).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from core.echo import (
    DEFAULT_SYSTEM,
    MAX_ECHO_BYTES,
    MAX_ECHO_DEPTH,
    MAX_EPOCH_US,
    MIN_EPOCH_US,
    SCHEMA_VERSION,
    SYSTEMS,
    BadEcho,
    Echo,
    Hiccup,
    decode_record,
)
from core.echo_v2 import (
    ECHO_COLUMNS,
    HAS_ACKED,
    HAS_RECEIVED,
    HAS_TIMEOUT,
    HICCUP_COLUMNS,
    KNOWN_FLAGS,
    LOST,
    MAGIC,
    long_label,
    read_header,
)
from core.labels import MAX_LABEL_BYTES

#: What the parser hands on: one row per record; ``rtype`` is echo, hiccup or bad.
PARSED_SCHEMA = pa.schema(
    [
        ("rtype", pa.string()),
        ("reason", pa.string()),
        ("cluster", pa.string()),
        ("topic", pa.string()),
        ("partition", pa.int64()),
        ("leader", pa.int64()),
        ("system", pa.string()),
        ("intended_us", pa.int64()),
        ("sent_us", pa.int64()),
        ("acked_us", pa.int64()),
        ("received_us", pa.int64()),
        ("lost", pa.bool_()),
        ("timeout_us", pa.int64()),
        ("max_us", pa.int64()),
    ]
)

_JSON_SCHEMA = pa.schema([
    ("v", pa.int64()), ("type", pa.string()), ("probe", pa.string()), ("cluster", pa.string()),
    ("topic", pa.string()), ("partition", pa.int64()), ("leader", pa.int64()),
    ("seq", pa.int64()), ("size", pa.int64()), ("intended_us", pa.int64()),
    ("sent_us", pa.int64()), ("acked_us", pa.int64()), ("received_us", pa.int64()),
    ("lost", pa.bool_()), ("timeout_us", pa.int64()), ("start_us", pa.int64()),
    ("end_us", pa.int64()), ("max_us", pa.int64()), ("total_us", pa.int64()),
    ("count", pa.int64()), ("system", pa.string()),
])  # fmt: skip
_PARSE_OPTIONS = pj.ParseOptions(explicit_schema=_JSON_SCHEMA, unexpected_field_behavior="ignore")
#: Single-threaded, one block per chunk: Spark already runs a parser per core, and Arrow's thread
#: pool on top halved the rate (262k → 479k records/s on this 2-core machine, measured).
_READ_OPTIONS = pj.ReadOptions(use_threads=False, block_size=1 << 24)


def _time_ok(col: pa.ChunkedArray) -> pa.ChunkedArray:
    return pc.and_(pc.greater_equal(col, MIN_EPOCH_US), pc.less_equal(col, MAX_EPOCH_US))


def _short(col: pa.ChunkedArray, field: str) -> pa.ChunkedArray:
    """No longer than the field's label limit (UTF-8 bytes); a longer one goes to the reference."""
    return pc.less_equal(pc.binary_length(col), MAX_LABEL_BYTES[field])


def _fast_ok(t: pa.Table) -> tuple[pa.ChunkedArray, pa.ChunkedArray]:
    """(is_echo_ok, is_hiccup_ok): rows that certainly pass every check."""
    nonneg = lambda name: pc.fill_null(pc.greater_equal(t[name], 0), False)  # noqa: E731
    v_ok = pc.fill_null(pc.equal(t["v"], SCHEMA_VERSION), False)
    # null ``type``/``lost`` may be absent (defaults) or JSON null (bad): the reference decides
    kind = t["type"]
    lost = t["lost"]
    echo = pc.and_(v_ok, pc.equal(kind, "echo"))
    echo = pc.and_(echo, pc.is_valid(lost))
    for name in ("probe", "cluster", "topic"):
        echo = pc.and_(echo, pc.fill_null(_short(t[name], name), False))
    for name in ("partition", "seq", "size"):
        echo = pc.and_(echo, nonneg(name))
    echo = pc.and_(echo, pc.fill_null(pc.greater_equal(t["leader"], -1), False))
    # absent is kafka (a JSON null never gets here: _parse_chunk sends it to the reference)
    system_ok = pc.or_(pc.is_null(t["system"]), pc.is_in(t["system"], pa.array(SYSTEMS)))
    echo = pc.and_(echo, system_ok)
    for name in ("intended_us", "sent_us"):
        echo = pc.and_(echo, pc.fill_null(_time_ok(t[name]), False))
    for name in ("acked_us", "received_us"):
        echo = pc.and_(echo, pc.fill_null(_time_ok(t[name]), True))
        echo = pc.and_(echo, pc.fill_null(pc.greater_equal(t[name], t["intended_us"]), True))
    echo = pc.and_(echo, pc.fill_null(pc.greater_equal(t["sent_us"], t["intended_us"]), False))
    echo = pc.and_(echo, pc.fill_null(pc.greater_equal(t["timeout_us"], 0), True))
    needs = pc.if_else(lost, pc.is_valid(t["timeout_us"]), pc.is_valid(t["received_us"]))
    echo = pc.and_(echo, needs)
    hic = pc.and_(v_ok, pc.equal(kind, "hiccup"))
    for name in ("probe", "cluster"):
        hic = pc.and_(hic, pc.fill_null(_short(t[name], name), False))
    for name in ("max_us", "total_us", "count"):
        hic = pc.and_(hic, nonneg(name))
    for name in ("start_us", "end_us"):
        hic = pc.and_(hic, pc.fill_null(_time_ok(t[name]), False))
    hic = pc.and_(hic, pc.fill_null(pc.greater_equal(t["end_us"], t["start_us"]), False))
    return pc.fill_null(echo, False), pc.fill_null(hic, False)


def _row(rec: Echo | Hiccup) -> dict[str, object]:
    if isinstance(rec, Echo):
        return {
            "rtype": "echo",
            "reason": None,
            "cluster": rec.cluster,
            "topic": rec.topic,
            "partition": rec.partition,
            "leader": rec.leader,
            "system": rec.system,
            "intended_us": rec.intended_us,
            "sent_us": rec.sent_us,
            "acked_us": rec.acked_us,
            "received_us": rec.received_us,
            "lost": rec.lost,
            "timeout_us": rec.timeout_us,
            "max_us": None,
        }
    return {
        "rtype": "hiccup",
        "reason": None,
        "cluster": rec.cluster,
        "topic": "",  # type: ignore[attr-defined]
        "partition": None,
        "leader": None,
        "system": None,
        "intended_us": rec.start_us,
        "sent_us": None,  # type: ignore[attr-defined]
        "acked_us": None,
        "received_us": None,
        "lost": False,
        "timeout_us": None,
        "max_us": rec.max_us,
    }  # type: ignore[attr-defined]


INT64_MAX = 2**63 - 1


def _fits_int64(rec: Echo | Hiccup) -> bool:
    """JSON integers are unbounded; one beyond int64 cannot be a column value, so it is bad."""
    return all(
        not isinstance(v, int) or abs(v) <= INT64_MAX
        for v in (getattr(rec, f) for f in rec.__slots__)
    )


def _slow(values: Sequence[bytes | None]) -> pa.RecordBatch:
    rows: list[dict[str, object]] = []
    for raw in values:
        try:
            rec = decode_record(raw)
        except BadEcho as exc:
            rows.append({"rtype": "bad", "reason": exc.reason})
            continue
        rows.append(_row(rec) if _fits_int64(rec) else {"rtype": "bad", "reason": "bad_type"})
    return pa.RecordBatch.from_pylist(rows, schema=PARSED_SCHEMA)


#: Records parsed together; a malformed one sends only its chunk down the slow path.
CHUNK = 4096
_EMPTY = pa.RecordBatch.from_pylist([], schema=PARSED_SCHEMA)


def parse_values(values: Sequence[bytes | None]) -> pa.RecordBatch:
    """The parsed rows of Kafka values, in order; bad records carry the reference's reason.

    A v1 value is one row; a v2 batch is one row per record it holds (echoes, then hiccups), or
    one ``bad`` row when its header or size is wrong. Never raises on any input: a null value
    (tombstone), oversize, non-UTF-8 or hostile JSON, a hostile v2 batch, is a ``bad`` row.
    """
    return parse_messages(values)[0]


def parse_messages(values: Sequence[bytes | None]) -> tuple[pa.RecordBatch, npt.NDArray[np.int64]]:
    """``parse_values``, and for each row the index of the value it came from."""
    v2 = [v is not None and v[:4] == MAGIC for v in values]
    if not any(v2):
        return _parse_v1(values), np.arange(len(values), dtype=np.int64)
    if all(v2):
        return _parse_v2(values)  # type: ignore[arg-type]
    # a mix: parse each kind apart, then put the rows back in the values' order
    v1_at = np.array([i for i, x in enumerate(v2) if not x], dtype=np.int64)
    v2_at = np.array([i for i, x in enumerate(v2) if x], dtype=np.int64)
    v1_rows = _parse_v1([values[i] for i in v1_at])
    v2_rows, v2_index = _parse_v2([values[i] for i in v2_at])  # type: ignore[misc]
    source = np.concatenate([v1_at, v2_at[v2_index]])
    order = np.argsort(source, kind="stable")
    both = pa.Table.from_batches([v1_rows, v2_rows], schema=PARSED_SCHEMA).take(order)
    return both.combine_chunks().to_batches()[0], source[order]


def parse_with_stamps(
    values: Sequence[bytes | None], kafka_us: Sequence[int | None], max_skew_us: int
) -> pa.RecordBatch:
    """Parse Kafka values and mark ``future`` rows against their message's Kafka timestamp."""
    parsed, index = parse_messages(values)
    stamps = pa.array(kafka_us, pa.int64()).take(pa.array(index))
    return mark_future(parsed, stamps, max_skew_us)


#: Records the template path reads at once (its scratch arrays are ~600 bytes a record).
TEMPLATE_CHUNK = 16_384


def _parse_v1(values: Sequence[bytes | None]) -> pa.RecordBatch:
    """The probes' own layout with numpy (``_template_rows``); any other record as before."""
    if len(values) > TEMPLATE_CHUNK:
        parts = [
            _parse_v1(values[i : i + TEMPLATE_CHUNK]) for i in range(0, len(values), TEMPLATE_CHUNK)
        ]
        return _concat(parts)
    fast, taken = _template_rows(values)
    if taken.all():
        return fast
    rest_at = np.flatnonzero(~taken)
    rest = _parse_other([values[i] for i in rest_at.tolist()])
    if not taken.any():
        return rest
    order = np.argsort(np.concatenate([np.flatnonzero(taken), rest_at]), kind="stable")
    both = pa.Table.from_batches([fast, rest], schema=PARSED_SCHEMA).take(order)
    return both.combine_chunks().to_batches()[0]


def _concat(parts: list[pa.RecordBatch]) -> pa.RecordBatch:
    return pa.Table.from_batches(parts, schema=PARSED_SCHEMA).combine_chunks().to_batches()[0]


def _parse_other(values: Sequence[bytes | None]) -> pa.RecordBatch:
    """Records not in the probes' layout: Arrow's JSON reader, then the reference where needed."""
    if len(values) <= CHUNK:
        return _parse_chunk(values)
    return _concat([_parse_chunk(values[i : i + CHUNK]) for i in range(0, len(values), CHUNK)])


def _fast_candidate(value: bytes | None) -> bool:
    """One small, shallow JSON object on one line; anything else goes to the reference parser."""
    return (
        value is not None
        and len(value) <= MAX_ECHO_BYTES
        and value.lstrip()[:1] == b"{"
        and b"\n" not in value
        and b"\r" not in value
    )


#: ``"system": null``, which the reference refuses and Arrow would read as an absent field.
_NULL_SYSTEM = re.compile(rb'"system"\s*:\s*null')


def _plain(value: bytes) -> bool:
    """Nothing Arrow accepts but the reference refuses: no deep nesting or bad UTF-8 (Arrow
    does not look inside fields it ignores). Brackets in strings count too, which only sends
    more rows to the reference."""
    if value.count(b"{") + value.count(b"[") > MAX_ECHO_DEPTH:
        return False
    if _NULL_SYSTEM.search(value):  # Arrow reads it as absent (kafka); the reference: bad_type
        return False
    if not value.isascii():
        try:
            value.decode()
        except UnicodeDecodeError:
            return False
    return True


def _parse_chunk(values: Sequence[bytes | None]) -> pa.RecordBatch:
    if not values:
        return pa.RecordBatch.from_pylist([], schema=PARSED_SCHEMA)
    candidate = [_fast_candidate(v) for v in values]
    fast_values = [v for v, ok in zip(values, candidate, strict=True) if ok]
    joined = b"\n".join(fast_values)  # type: ignore[arg-type]
    # a few fast scans of the whole chunk (~0.1 µs a record); only a suspicious chunk (nesting,
    # non-ASCII) is checked row by row
    if (
        b"[" in joined
        or joined.count(b"{") > len(fast_values)
        or not joined.isascii()
        or _NULL_SYSTEM.search(joined)
    ):
        candidate = [c and _plain(v) for c, v in zip(candidate, values, strict=True)]  # type: ignore[arg-type]
        fast_values = [v for v, ok in zip(values, candidate, strict=True) if ok]
        joined = b"\n".join(fast_values)  # type: ignore[arg-type]
    if not fast_values:
        return _slow(values)
    try:
        t = pj.read_json(
            pa.py_buffer(joined), read_options=_READ_OPTIONS, parse_options=_PARSE_OPTIONS
        )
    except (pa.ArrowException, ValueError):  # a bad UTF-8 error message raised UnicodeDecodeError
        return _slow(values)
    if t.num_rows != len(fast_values):
        return _slow(values)
    echo_ok, hic_ok = _fast_ok(t)
    is_hic = pc.fill_null(pc.equal(t["type"], "hiccup"), False)
    good = pc.or_(echo_ok, hic_ok)
    out = pa.table(
        {
            "rtype": pc.if_else(is_hic, "hiccup", "echo"),
            "reason": pa.nulls(t.num_rows, pa.string()),
            "cluster": t["cluster"],
            "topic": pc.if_else(is_hic, "", t["topic"]),
            "partition": t["partition"],
            "leader": pc.if_else(is_hic, pa.scalar(None, pa.int64()), t["leader"]),
            "system": pc.if_else(
                is_hic, pa.scalar(None, pa.string()), pc.fill_null(t["system"], DEFAULT_SYSTEM)
            ),
            "intended_us": pc.if_else(is_hic, t["start_us"], t["intended_us"]),
            "sent_us": t["sent_us"],
            "acked_us": t["acked_us"],
            "received_us": t["received_us"],
            "lost": pc.fill_null(t["lost"], False),
            "timeout_us": t["timeout_us"],
            "max_us": t["max_us"],
        },
        schema=PARSED_SCHEMA,
    )
    if len(fast_values) == len(values) and pc.all(good).as_py():
        return out.combine_chunks().to_batches()[0]
    fast_ok = iter(good.to_pylist())
    ok_all = [c and next(fast_ok) for c in candidate]
    fixed = iter(_slow([v for v, ok in zip(values, ok_all, strict=True) if not ok]).to_pylist())
    parsed = iter(out.to_pylist())
    merged = []
    for c, ok in zip(candidate, ok_all, strict=True):
        row = next(parsed) if c else None
        merged.append(row if ok else next(fixed))
    return pa.RecordBatch.from_pylist(merged, schema=PARSED_SCHEMA)


# --- schema v1 in the probes' own layout: read with numpy, no JSON parser ------------------------


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


#: An echo as ``core.echo.encode_record`` writes it is these fixed runs (each starting at the
#: given quote of the record, plus an offset) with a string or a number between two of them. The
#: runs cover every byte that is not a value, so a record that has them all, its values in between,
#: is that layout exactly. ``system`` (only when not kafka) adds 4 quotes at the end.
_NUMBERS = ("partition", "leader", "seq", "size", "intended_us", "sent_us", "acked_us",
            "received_us", "lost", "timeout_us")  # fmt: skip
_QUOTES, _QUOTES_SYSTEM = 38, 42
_HEAD = [(0, 0, b'"probe":"'), (3, 0, b'","cluster":"'), (7, 0, b'","topic":"'),
         (11, 0, b'","partition":')] + [
    (14 + 2 * i, -1, b',"' + name.encode() + b'":') for i, name in enumerate(_NUMBERS[1:])
] + [(32, -1, b',"v":1,"type":"echo"')]  # fmt: skip
_WORDS = [w for run in _HEAD for w in _runs(*run)]
_WORD_QUOTE = np.array([w[0] for w in _WORDS])
_WORD_OFFSET = np.array([w[1] for w in _WORDS], np.int64)
_WORD_VALUE = np.array([w[2] for w in _WORDS], np.uint64)
_WORD_MASK = np.array([w[3] for w in _WORDS], np.uint64)
_SYSTEM_RUN = _runs(37, 0, b'","system":"')[0:2]
#: Bytes after the last record, so that a word (8 bytes) can be read up to 32 bytes past any quote.
_PAD = 40
#: Longest integer read here (18 digits always fit int64); a longer one goes to the other path.
_MAX_DIGITS = 18
#: The longest record of that layout: its fixed runs, the longest labels and system, 10 numbers.
_MAX_LAYOUT_BYTES = (
    sum(len(run[2]) for run in _HEAD) + 12 + 2 + sum(MAX_LABEL_BYTES.values())
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


def _template_rows(values: Sequence[bytes | None]) -> tuple[pa.RecordBatch, npt.NDArray[np.bool_]]:
    """The echoes among ``values`` laid out exactly as the probes write them, and which those are.

    A record is taken only if it is that layout byte for byte (keys in order, no spaces, no
    escapes, printable ASCII, plain integers) and passes every schema-v1 check: a JSON object
    the reference reads the same values from and accepts. Any other is left to ``_parse_chunk``.
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
        return _EMPTY, taken
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
        return _EMPTY, taken
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
            (words[head + 4] & _SYSTEM_RUN[1][3]) == _SYSTEM_RUN[1][2]
        )
        end_quote = end_quote.copy()
        end_quote[tail] = qs[:, -1]
    good &= end_quote == last - 2
    # the numbers: between the end of one run and the start of the next
    run_end = np.stack(
        [q[:, r[0]] + r[1] + len(r[2]) for r in _HEAD[3:-1]], axis=1
    )  # after "partition": ... after "timeout_us":
    run_start = np.stack([q[:, r[0]] + r[1] for r in _HEAD[4:]], axis=1)
    length = run_start - run_end
    good &= (length > 0).all(axis=1) & (length <= _MAX_DIGITS).all(axis=1)
    if not good.any():
        return _EMPTY, taken
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
    for name, i in (("probe", 2), ("cluster", 6), ("topic", 10)):
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
        return _EMPTY, taken
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
            label(6),
            label(10),
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


def _parse_v2(values: Sequence[bytes]) -> tuple[pa.RecordBatch, npt.NDArray[np.int64]]:
    """The rows of v2 batches: headers checked in Python, columns read and checked with numpy.

    Rows come in the values' order, each batch's echoes before its hiccups; a batch whose header
    is bad is one row. Returns the rows and, per row, the index of its value.
    """
    ne, nh = len(ECHO_COLUMNS), len(HICCUP_COLUMNS)
    echo_parts: list[npt.NDArray[np.int64]] = []
    hic_parts: list[npt.NDArray[np.int64]] = []
    flag_parts: list[npt.NDArray[np.uint8]] = []
    n_echo = np.zeros(len(values), np.int64)
    n_hic = np.zeros(len(values), np.int64)
    clusters: list[str | None] = []
    topics: list[str | None] = []
    systems: list[str | None] = []
    bad_src: list[int] = []
    bad_reason: list[str] = []
    for k, value in enumerate(values):
        try:
            h = read_header(value)
        except BadEcho as exc:
            bad_src.append(k)
            bad_reason.append(exc.reason)
            clusters.append(None)
            topics.append(None)
            systems.append(None)
            continue
        clusters.append(h.cluster)
        topics.append(h.topic)
        systems.append(h.system)
        if long_label(h) is not None:  # every record of the batch is bad, each one counted
            bad_src.extend([k] * (h.echoes + h.hiccups))
            bad_reason.extend(["label_too_long"] * (h.echoes + h.hiccups))
            continue
        n, m = n_echo[k], n_hic[k] = h.echoes, h.hiccups
        ints = np.frombuffer(value, "<i8", n * ne + m * nh, h.columns_at)
        echo_parts.append(ints[: n * ne].reshape(ne, n))
        hic_parts.append(ints[n * ne :].reshape(nh, m))
        flag_parts.append(np.frombuffer(value, np.uint8, n, h.columns_at + 8 * len(ints)))
    idx = np.arange(len(values), dtype=np.int64)
    echo_src, hic_src = np.repeat(idx, n_echo), np.repeat(idx, n_hic)
    blocks = [
        _v2_echo_rows(
            _stack(echo_parts, ne), _flat(flag_parts), echo_src, clusters, topics, systems
        ),
        _v2_hiccup_rows(_stack(hic_parts, nh), hic_src, clusters),
        _bad_rows(bad_reason),
    ]
    if not len(hic_src) and not bad_src:  # echoes only, already in order: no copy
        return blocks[0], echo_src
    src = np.concatenate([echo_src, hic_src, np.array(bad_src, np.int64)])
    table = pa.Table.from_batches(blocks, schema=PARSED_SCHEMA)
    order = np.lexsort((np.repeat([0, 1, 0], [len(echo_src), len(hic_src), len(bad_src)]), src))
    table, src = table.take(order), src[order]
    return table.combine_chunks().to_batches()[0], src


def _stack(parts: list[npt.NDArray[np.int64]], columns: int) -> npt.NDArray[np.int64]:
    return np.concatenate(parts, axis=1) if parts else np.zeros((columns, 0), np.int64)


def _flat(parts: list[npt.NDArray[np.uint8]]) -> npt.NDArray[np.uint8]:
    return np.concatenate(parts) if parts else np.zeros(0, np.uint8)


def _bad_rows(reasons: list[str]) -> pa.RecordBatch:
    return pa.RecordBatch.from_pylist(
        [{"rtype": "bad", "reason": r} for r in reasons], schema=PARSED_SCHEMA
    )


def _int_col(values: npt.NDArray[np.int64], valid: npt.NDArray[np.bool_]) -> pa.Array:
    # no validity bitmap when every value is there (the usual batch): cheaper here and after
    return pa.array(values, pa.int64(), mask=None if valid.all() else ~valid)


def _labels(
    per_value: list[str | None], src: npt.NDArray[np.int64], ok: npt.NDArray[np.bool_]
) -> pa.Array:
    """A label column: each good row its value's label, a bad row null (the extra null at the
    end of the table). One label for every row (a probe's usual batch) is repeated, not taken."""
    if len(src) and ok.all() and len(set(per_value)) == 1 and per_value[0] is not None:
        return pa.repeat(pa.scalar(per_value[0], pa.string()), len(src))
    return pa.array([*per_value, None], pa.string()).take(
        pa.array(np.where(ok, src, len(per_value)))
    )


def _v2_echo_rows(
    e: npt.NDArray[np.int64],
    flags: npt.NDArray[np.uint8],
    src: npt.NDArray[np.int64],
    clusters: list[str | None],
    topics: list[str | None],
    systems: list[str | None],
) -> pa.RecordBatch:
    """Echo rows; a bad one has only its ``rtype`` and ``reason``, like a bad v1 row."""
    c = dict(zip(ECHO_COLUMNS, e, strict=True))
    code = _echo_reasons(c, flags)
    ok = code == 0
    n = len(ok)
    good = bool(ok.all())
    return pa.RecordBatch.from_arrays(
        [
            pa.repeat(pa.scalar("echo"), n)
            if good
            else _V2_RTYPE["echo"].take(pa.array(~ok, pa.int8())),
            pa.nulls(n, pa.string()) if good else _V2_REASONS.take(pa.array(code)),
            _labels(clusters, src, ok),
            _labels(topics, src, ok),
            _int_col(c["partition"], ok),
            _int_col(c["leader"], ok),
            _labels(systems, src, ok),
            _int_col(c["intended_us"], ok),
            _int_col(c["sent_us"], ok),
            _int_col(c["acked_us"], ok & (flags & HAS_ACKED > 0)),
            _int_col(c["received_us"], ok & (flags & HAS_RECEIVED > 0)),
            pa.array(flags & LOST > 0, pa.bool_(), mask=None if good else ~ok),
            _int_col(c["timeout_us"], ok & (flags & HAS_TIMEOUT > 0)),
            pa.nulls(n, pa.int64()),
        ],
        schema=PARSED_SCHEMA,
    )


def _v2_hiccup_rows(
    hc: npt.NDArray[np.int64], src: npt.NDArray[np.int64], clusters: list[str | None]
) -> pa.RecordBatch:
    """Hiccup rows, shaped like ``_row`` shapes a v1 hiccup (event time ``start_us``)."""
    c = dict(zip(HICCUP_COLUMNS, hc, strict=True))
    code = _hiccup_reasons(c)
    ok = code == 0
    n = len(ok)
    bad = pa.array(~ok, pa.int8())
    return pa.RecordBatch.from_arrays(
        [
            _V2_RTYPE["hiccup"].take(bad),
            _V2_REASONS.take(pa.array(code)),
            pa.array([*clusters, None], pa.string()).take(
                pa.array(np.where(ok, src, len(clusters)))
            ),
            pa.array(["", None], pa.string()).take(bad),
            pa.nulls(n, pa.int64()),
            pa.nulls(n, pa.int64()),
            pa.nulls(n, pa.string()),
            _int_col(c["start_us"], ok),
            pa.nulls(n, pa.int64()),
            pa.nulls(n, pa.int64()),
            pa.nulls(n, pa.int64()),
            pa.array(np.zeros(n, bool), pa.bool_(), mask=~ok),
            pa.nulls(n, pa.int64()),
            _int_col(c["max_us"], ok),
        ],
        schema=PARSED_SCHEMA,
    )


#: A v2 record's verdict is a small code (0: good), turned into its reason by one ``take``.
_V2_REASON_NAMES = ("negative", "absurd_time", "missing_field", "order", "bad_type")
_V2_REASONS = pa.array([None, *_V2_REASON_NAMES], pa.string())
_V2_CODE = {name: i + 1 for i, name in enumerate(_V2_REASON_NAMES)}
_V2_RTYPE = {kind: pa.array([kind, "bad"], pa.string()) for kind in ("echo", "hiccup")}


def _echo_reasons(
    c: dict[str, npt.NDArray[np.int64]], flags: npt.NDArray[np.uint8]
) -> npt.NDArray[np.uint8]:
    """Each echo's first failed check, in ``core.echo_v2._check_echo``'s order, or 0."""

    def time_bad(x: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_]:
        return (x < MIN_EPOCH_US) | (x > MAX_EPOCH_US)

    acked, received = flags & HAS_ACKED > 0, flags & HAS_RECEIVED > 0
    timeout, lost = flags & HAS_TIMEOUT > 0, flags & LOST > 0
    intended = c["intended_us"]
    neg = (c["partition"] < 0) | (c["seq"] < 0) | (c["size"] < 0) | (intended < 0)
    neg |= (c["sent_us"] < 0) | (c["leader"] < -1)
    checks = [
        ((flags & ~np.uint8(KNOWN_FLAGS)) > 0, "bad_type"),
        (neg, "negative"),
        (time_bad(intended) | time_bad(c["sent_us"]), "absurd_time"),
        (acked & (c["acked_us"] < 0), "negative"),
        (acked & time_bad(c["acked_us"]), "absurd_time"),
        (received & (c["received_us"] < 0), "negative"),
        (received & time_bad(c["received_us"]), "absurd_time"),
        (timeout & (c["timeout_us"] < 0), "negative"),
        ((lost & ~timeout) | (~lost & ~received), "missing_field"),
        ((c["sent_us"] < intended) | (acked & (c["acked_us"] < intended))
         | (received & (c["received_us"] < intended)), "order"),
    ]  # fmt: skip
    return np.select([m for m, _ in checks], [_V2_CODE[r] for _, r in checks], 0).astype(np.uint8)


def _hiccup_reasons(c: dict[str, npt.NDArray[np.int64]]) -> npt.NDArray[np.uint8]:
    """Each hiccup's first failed check, in ``core.echo_v2._check_hiccup``'s order, or 0."""
    start, end = c["start_us"], c["end_us"]
    neg = np.zeros(len(start), bool)
    for v in c.values():
        neg |= v < 0
    absurd = (start < MIN_EPOCH_US) | (start > MAX_EPOCH_US) | (end < MIN_EPOCH_US)
    absurd |= end > MAX_EPOCH_US
    codes = [_V2_CODE["negative"], _V2_CODE["absurd_time"], _V2_CODE["order"]]
    return np.select([neg, absurd, end < start], codes, 0).astype(np.uint8)


def mark_future(parsed: pa.RecordBatch, kafka_us: pa.Array, max_skew_us: int) -> pa.RecordBatch:
    """Rows whose event time is more than ``max_skew_us`` ahead of their Kafka timestamp become
    ``bad``/``future`` with every other column null, so they never reach the watermark.

    One probe with a wrong clock an hour ahead would otherwise move the watermark an hour
    forward and make every later echo late. A null Kafka timestamp (none recorded) is trusted.
    """
    ahead = pc.fill_null(
        pc.greater(parsed.column("intended_us"), pc.add(kafka_us, max_skew_us)), False
    )
    if not pc.any(ahead).as_py():  # the usual fetch: no string compare per row
        return parsed
    future = pc.and_(ahead, pc.not_equal(parsed.column("rtype"), "bad"))
    if not pc.any(future).as_py():
        return parsed
    cols = [
        pc.if_else(future, "bad", parsed.column("rtype")),
        pc.if_else(future, "future", parsed.column("reason")),
        *(pc.if_else(future, pa.scalar(None, col.type), col) for col in parsed.columns[2:]),
    ]
    return pa.RecordBatch.from_arrays(cols, schema=PARSED_SCHEMA)
