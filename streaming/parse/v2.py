"""Format v2 (echoes batched per Kafka message) read with numpy; ``core.echo_v2`` is the reference.

Each batch's header is checked in Python (``core.echo_v2.read_header``), its columns are read
with numpy and validated all at once, with the reasons and check order of
``core.echo_v2.decode_batch`` (the tests hold them equal).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from core.echo import MAX_EPOCH_US, MIN_EPOCH_US, BadEcho
from core.echo_v2 import (
    ECHO_COLUMNS,
    HAS_ACKED,
    HAS_RECEIVED,
    HAS_TIMEOUT,
    HICCUP_COLUMNS,
    KNOWN_FLAGS,
    LOST,
    long_label,
    read_header,
)
from streaming.parse.rows import PARSED_SCHEMA


def parse_v2(values: Sequence[bytes]) -> tuple[pa.RecordBatch, npt.NDArray[np.int64]]:
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
    """Hiccup rows, shaped as ``v1_json`` shapes a v1 hiccup (event time ``start_us``)."""
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
