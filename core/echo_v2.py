"""Echo format v2: many echoes per Kafka message in a documented little-endian columnar layout.

See docs/echo-format.md (v2). One v1 echo is ~300 bytes of JSON and one Kafka message; a v2 batch
carries up to thousands of echoes at 73 bytes each, read column by column without parsing. The
layout is fixed rather than Arrow IPC so that the pure core (no pyarrow) holds the reference
codec, every byte of a hostile payload is checked by our own code, and a reader in any language
is ~40 lines. This module is the reference both the probe (encoder) and the streaming job's
vectorised decoder (``streaming.parse.v2``) are tested against.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Final, NamedTuple

from core.echo import (
    DEFAULT_SYSTEM,
    MAX_EPOCH_US,
    MIN_EPOCH_US,
    SYSTEMS,
    BadEcho,
    Echo,
    Hiccup,
    decode_record,
)
from core.labels import MAX_LABEL_BYTES, too_long

#: The first four bytes of every v2 batch. 0x92 is a UTF-8 continuation byte, so no JSON text
#: (hence no v1 echo) can begin with it.
MAGIC: Final = b"\x92N9E"
FORMAT_VERSION: Final = 2
#: magic, version, system (its index in ``core.echo.SYSTEMS``: 0 kafka, 1 nats, 2 redis,
#: 3 rabbitmq), echoes, hiccups, probe/cluster/topic byte lengths, reserved
HEADER: Final = struct.Struct("<4sHHIIHHHH")
#: Echo columns, each ``echoes`` little-endian int64s, in this order; then one uint8 of flags each.
ECHO_COLUMNS: Final = (
    "partition",
    "leader",
    "seq",
    "size",
    "intended_us",
    "sent_us",
    "acked_us",
    "received_us",
    "timeout_us",
)
#: Hiccup columns, each ``hiccups`` little-endian int64s, after the echo columns.
HICCUP_COLUMNS: Final = ("start_us", "end_us", "max_us", "total_us", "count")
#: Bits of an echo's flags byte; any other bit set makes the echo bad (``bad_type``).
LOST: Final = 1
HAS_ACKED: Final = 2
HAS_RECEIVED: Final = 4
HAS_TIMEOUT: Final = 8
KNOWN_FLAGS: Final = LOST | HAS_ACKED | HAS_RECEIVED | HAS_TIMEOUT
#: Bytes per echo and per hiccup in a batch.
ECHO_BYTES: Final = 8 * len(ECHO_COLUMNS) + 1
HICCUP_BYTES: Final = 8 * len(HICCUP_COLUMNS)
#: A batch over this is refused unread (Kafka's default ``message.max.bytes`` is about 1 MB).
MAX_BATCH_BYTES: Final = 1024 * 1024
#: The most echoes an encoder puts in one batch, so a batch stays under MAX_BATCH_BYTES.
MAX_BATCH_ECHOES: Final = 10_000


def is_v2(value: bytes | None) -> bool:
    """Whether a Kafka value claims to be a v2 batch (anything else is read as v1)."""
    return value is not None and value[:4] == MAGIC


def padded(n: int) -> int:
    """``n`` rounded up to a multiple of 8, so every column starts 8-byte aligned."""
    return (n + 7) & ~7


def encode_batch(records: Sequence[Echo | Hiccup]) -> bytes:
    """One v2 batch of records that share one probe, cluster, system and (for echoes) topic.

    ValueError when they do not, or when there are none or more than MAX_BATCH_ECHOES.
    """
    echoes = [r for r in records if isinstance(r, Echo)]
    hiccups = [r for r in records if isinstance(r, Hiccup)]
    if not records or len(records) > MAX_BATCH_ECHOES:
        raise ValueError(f"a v2 batch holds 1 to {MAX_BATCH_ECHOES} records, not {len(records)}")
    first = records[0]
    topic = echoes[0].topic if echoes else ""
    system = echoes[0].system if echoes else DEFAULT_SYSTEM
    if any(r.probe != first.probe or r.cluster != first.cluster for r in records) or any(
        e.topic != topic or e.system != system for e in echoes
    ):
        raise ValueError("a v2 batch holds the records of one probe, cluster, system and topic")
    strings = [s.encode() for s in (first.probe, first.cluster, topic)]
    n, m = len(echoes), len(hiccups)
    head = HEADER.pack(MAGIC, FORMAT_VERSION, SYSTEMS.index(system), n, m, *map(len, strings), 0)
    head += b"".join(strings)
    cols = [
        [e.partition for e in echoes],
        [e.leader for e in echoes],
        [e.seq for e in echoes],
        [e.size for e in echoes],
        [e.intended_us for e in echoes],
        [e.sent_us for e in echoes],
        [e.acked_us or 0 for e in echoes],
        [e.received_us or 0 for e in echoes],
        [e.timeout_us or 0 for e in echoes],
        [h.start_us for h in hiccups],
        [h.end_us for h in hiccups],
        [h.max_us for h in hiccups],
        [h.total_us for h in hiccups],
        [h.count for h in hiccups],
    ]
    flags = bytes(
        (LOST if e.lost else 0)
        | (HAS_ACKED if e.acked_us is not None else 0)
        | (HAS_RECEIVED if e.received_us is not None else 0)
        | (HAS_TIMEOUT if e.timeout_us is not None else 0)
        for e in echoes
    )
    ints = [v for col in cols for v in col]
    body = struct.pack(f"<{len(ints)}q", *ints)
    return head + bytes(padded(len(head)) - len(head)) + body + flags


class BatchHeader(NamedTuple):
    """What a v2 batch says about itself; ``columns_at`` is where its first column starts."""

    echoes: int
    hiccups: int
    probe: str
    cluster: str
    topic: str
    columns_at: int
    system: str = DEFAULT_SYSTEM


def read_header(value: bytes) -> BatchHeader:
    """The header of a v2 batch, every byte of it checked; BadEcho with the reason otherwise.

    After it, the columns are exactly ``echoes`` × ECHO_BYTES + ``hiccups`` × HICCUP_BYTES bytes.
    """
    if len(value) > MAX_BATCH_BYTES:
        raise BadEcho("too_large", f"{len(value)} bytes")
    if len(value) < HEADER.size:
        raise BadEcho("bad_length", f"{len(value)} bytes is shorter than the v2 header")
    magic, version, system, n, m, lp, lc, lt, reserved = HEADER.unpack_from(value)
    if magic != MAGIC:
        raise BadEcho("bad_header", "magic")
    if version != FORMAT_VERSION:
        raise BadEcho("version", str(version))
    if reserved:
        raise BadEcho("bad_header", "reserved bits set")
    if system >= len(SYSTEMS):
        raise BadEcho("system", f"system code {system}")
    at = HEADER.size + lp + lc + lt
    columns_at = padded(at)
    if len(value) != columns_at + n * ECHO_BYTES + m * HICCUP_BYTES:
        raise BadEcho("bad_length", f"{len(value)} bytes for {n} echoes and {m} hiccups")
    if any(value[at:columns_at]):
        raise BadEcho("bad_header", "padding bytes set")
    if n + m == 0:
        raise BadEcho("empty_batch")
    try:
        probe = value[HEADER.size : HEADER.size + lp].decode()
        cluster = value[HEADER.size + lp : HEADER.size + lp + lc].decode()
        topic = value[HEADER.size + lp + lc : at].decode()
    except UnicodeDecodeError:
        raise BadEcho("not_utf8") from None
    return BatchHeader(n, m, probe, cluster, topic, columns_at, SYSTEMS[system])


def long_label(h: BatchHeader) -> str | None:
    """The first of the batch's probe, cluster and topic longer than its limit (``core.labels``).

    The header is sound, so its counts are trusted: every record of the batch is bad with
    ``label_too_long``, each counted, rather than the batch as one.
    """
    for name, value in (("probe", h.probe), ("cluster", h.cluster), ("topic", h.topic)):
        if too_long(name, value):
            return name
    return None


def _check_echo(cols: dict[str, int], flags: int) -> str | None:
    """The first reason this echo is bad, in the order schema v1 checks its fields."""
    if flags & ~KNOWN_FLAGS:
        return "bad_type"
    if min(cols["partition"], cols["seq"], cols["size"], cols["intended_us"], cols["sent_us"]) < 0:
        return "negative"
    if cols["leader"] < -1:
        return "negative"
    for name in ("intended_us", "sent_us"):
        if not MIN_EPOCH_US <= cols[name] <= MAX_EPOCH_US:
            return "absurd_time"
    for name, bit in (("acked_us", HAS_ACKED), ("received_us", HAS_RECEIVED)):
        if flags & bit:
            if cols[name] < 0:
                return "negative"
            if not MIN_EPOCH_US <= cols[name] <= MAX_EPOCH_US:
                return "absurd_time"
    if flags & HAS_TIMEOUT and cols["timeout_us"] < 0:
        return "negative"
    if flags & LOST and not flags & HAS_TIMEOUT:
        return "missing_field"
    if not flags & LOST and not flags & HAS_RECEIVED:
        return "missing_field"
    for name, bit in (("sent_us", 0), ("acked_us", HAS_ACKED), ("received_us", HAS_RECEIVED)):
        if (bit == 0 or flags & bit) and cols[name] < cols["intended_us"]:
            return "order"
    return None


def _check_hiccup(cols: dict[str, int]) -> str | None:
    if min(cols.values()) < 0:
        return "negative"
    if not all(MIN_EPOCH_US <= cols[name] <= MAX_EPOCH_US for name in ("start_us", "end_us")):
        return "absurd_time"
    if cols["end_us"] < cols["start_us"]:
        return "order"
    return None


def decode_batch(value: bytes) -> list[Echo | Hiccup | BadEcho]:
    """Every record of a v2 batch, echoes first, each valid or a ``BadEcho`` with its reason.

    A batch whose header or size is wrong is one ``BadEcho`` (its records cannot be trusted); a
    batch with too long a label is that many ``label_too_long``; otherwise a bad record is that
    record alone. Never raises on any bytes.
    """
    try:
        h = read_header(value)
    except BadEcho as exc:
        return [exc]
    n, m = h.echoes, h.hiccups
    label = long_label(h)
    if label is not None:
        why = f"{label} over {MAX_LABEL_BYTES[label]} bytes"
        return [BadEcho("label_too_long", why) for _ in range(n + m)]
    ints = struct.unpack_from(f"<{n * len(ECHO_COLUMNS) + m * len(HICCUP_COLUMNS)}q", value,
                              h.columns_at)  # fmt: skip
    flags = value[h.columns_at + 8 * len(ints) :]
    out: list[Echo | Hiccup | BadEcho] = []
    for i in range(n):
        cols = {name: ints[k * n + i] for k, name in enumerate(ECHO_COLUMNS)}
        reason = _check_echo(cols, flags[i])
        if reason:
            out.append(BadEcho(reason))
            continue
        out.append(
            Echo(
                probe=h.probe,
                cluster=h.cluster,
                topic=h.topic,
                partition=cols["partition"],
                leader=cols["leader"],
                seq=cols["seq"],
                size=cols["size"],
                intended_us=cols["intended_us"],
                sent_us=cols["sent_us"],
                acked_us=cols["acked_us"] if flags[i] & HAS_ACKED else None,
                received_us=cols["received_us"] if flags[i] & HAS_RECEIVED else None,
                lost=bool(flags[i] & LOST),
                timeout_us=cols["timeout_us"] if flags[i] & HAS_TIMEOUT else None,
                system=h.system,
            )
        )
    base = n * len(ECHO_COLUMNS)
    for j in range(m):
        hcols = {name: ints[base + k * m + j] for k, name in enumerate(HICCUP_COLUMNS)}
        reason = _check_hiccup(hcols)
        out.append(BadEcho(reason) if reason else Hiccup(probe=h.probe, cluster=h.cluster, **hcols))
    return out


def decode_message(value: bytes) -> list[Echo | Hiccup]:
    """The records of one echo-topic message of either format (a v2 batch, or one v1 record);
    raises ``BadEcho`` on any bad one, for readers that expect the probes' own records."""
    if not is_v2(value):
        return [decode_record(value)]
    records = decode_batch(value)
    for r in records:
        if isinstance(r, BadEcho):
            raise r
    return records  # type: ignore[return-value]
