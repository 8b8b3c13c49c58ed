"""Schema v1 by Arrow's JSON reader, and ``core.echo.decode_record`` (the reference) where needed.

Any record not in the probes' own layout (``v1_template``) comes here. A chunk is parsed natively
and only rows that pass every schema-v1 check are accepted; any row it does not accept is
re-checked by the reference decoder, so the reason a bad record is counted under is always the
reference's.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

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
from core.labels import MAX_LABEL_BYTES
from streaming.parse.rows import PARSED_SCHEMA, concat

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


def parse_json(values: Sequence[bytes | None]) -> pa.RecordBatch:
    """Records not in the probes' layout: Arrow's JSON reader, then the reference where needed."""
    if len(values) <= CHUNK:
        return _parse_chunk(values)
    return concat([_parse_chunk(values[i : i + CHUNK]) for i in range(0, len(values), CHUNK)])


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
