"""Echo format v2: the reference codec round-trips, and judges each record as schema v1 would."""

from __future__ import annotations

import struct
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.echo import (
    BAD_REASONS,
    MAX_EPOCH_US,
    MIN_EPOCH_US,
    BadEcho,
    Echo,
    Hiccup,
    decode_record,
    encode_record,
)
from core.echo_v2 import (
    ECHO_BYTES,
    ECHO_COLUMNS,
    HEADER,
    HICCUP_BYTES,
    HICCUP_COLUMNS,
    MAGIC,
    MAX_BATCH_BYTES,
    MAX_BATCH_ECHOES,
    decode_batch,
    encode_batch,
    is_v2,
    padded,
    read_header,
)

T0 = 1_800_000_000_000_000
times = st.integers(MIN_EPOCH_US, MAX_EPOCH_US - 10**12)
small = st.integers(0, 10**9)
#: Any int64, with the edges every check has, so bad records are common.
odd = st.sampled_from(
    [-(2**63), -(10**6), -2, -1, 0, 1, MIN_EPOCH_US - 1, MIN_EPOCH_US, T0, MAX_EPOCH_US]
    + [MAX_EPOCH_US + 1, 2**63 - 1]
) | st.integers(-(2**63), 2**63 - 1)


def echo(seq: int, **kw: Any) -> Echo:
    fields: dict[str, Any] = {
        "probe": "p1",
        "cluster": "c",
        "topic": "nines.probe",
        "partition": seq % 3,
        "leader": 1,
        "seq": seq,
        "size": 512,
        "intended_us": T0 + seq,
        "sent_us": T0 + seq + 5,
        "acked_us": T0 + seq + 90,
        "received_us": T0 + seq + 100,
    }
    return Echo(**{**fields, **kw})


@st.composite
def sources(draw: Any) -> tuple[str, str, str]:
    return draw(st.text(max_size=8)), draw(st.text(max_size=8)), draw(st.text(max_size=8))


@st.composite
def good_batches(draw: Any) -> list[Echo | Hiccup]:
    """Valid records of one probe, cluster and topic (what a probe batches)."""
    probe, cluster, topic = draw(sources())
    out: list[Echo | Hiccup] = []
    for _ in range(draw(st.integers(1, 30))):
        t = draw(times)
        if draw(st.integers(0, 9)) == 0:
            out.append(
                Hiccup(probe, cluster, t, t + draw(small), *draw(st.tuples(small, small, small)))
            )
            continue
        lost = draw(st.booleans())
        out.append(
            Echo(
                probe, cluster, topic, draw(st.integers(0, 1000)), draw(st.integers(-1, 9)),
                draw(small), draw(small), t, t + draw(small),
                draw(st.none() | small.map(lambda d: t + d)),
                None if lost else t + draw(small),
                lost,
                draw(small) if lost else draw(st.none() | small),
            )
        )  # fmt: skip
    return out


def raw_batch(
    echo_cols: list[list[int]],
    flags: list[int],
    hic_cols: list[list[int]],
    strings: tuple[bytes, bytes, bytes] = (b"p", b"c", b"t"),
    *,
    version: int = 2,
    reserved: tuple[int, int] = (0, 0),
) -> bytes:
    """A v2 batch written field by field from docs/echo-format.md, whatever the values."""
    n, m = len(flags), len(hic_cols[0]) if hic_cols else 0
    head = HEADER.pack(MAGIC, version, reserved[0], n, m, *map(len, strings), reserved[1])
    head += b"".join(strings)
    head += bytes(padded(len(head)) - len(head))
    ints = [v for col in echo_cols for v in col] + [v for col in hic_cols for v in col]
    return head + struct.pack(f"<{len(ints)}q", *ints) + bytes(flags)


@st.composite
def any_echo_rows(draw: Any) -> tuple[dict[str, int], int]:
    """One echo's columns, each plausible or odd, and a flags byte (rarely with unknown bits)."""
    t = draw(times)
    plausible = {
        "partition": draw(small), "leader": draw(st.integers(-1, 3)), "seq": draw(small),
        "size": draw(small), "intended_us": t, "sent_us": t + draw(small),
        "acked_us": t + draw(small), "received_us": t + draw(small), "timeout_us": draw(small),
    }  # fmt: skip
    cols = {k: draw(odd) if draw(st.integers(0, 3)) == 0 else v for k, v in plausible.items()}
    flags = draw(st.integers(0, 15) | st.integers(0, 255))
    return cols, flags


def as_echo(cols: dict[str, int], flags: int) -> Echo:
    """The same echo as schema v1 sees it (absent fields are null)."""
    return Echo(
        "p", "c", "t", cols["partition"], cols["leader"], cols["seq"], cols["size"],
        cols["intended_us"], cols["sent_us"],
        cols["acked_us"] if flags & 2 else None,
        cols["received_us"] if flags & 4 else None,
        bool(flags & 1),
        cols["timeout_us"] if flags & 8 else None,
    )  # fmt: skip


def v1_verdict(rec: Echo | Hiccup) -> str | None:
    try:
        decode_record(encode_record(rec))
    except BadEcho as exc:
        return exc.reason
    return None


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(good_batches())
def test_a_batch_round_trips_echoes_first(records: list[Echo | Hiccup]) -> None:
    raw = encode_batch(records)
    assert is_v2(raw) and not is_v2(encode_record(records[0]))
    echoes = [r for r in records if isinstance(r, Echo)]
    hiccups = [r for r in records if isinstance(r, Hiccup)]
    back = decode_batch(raw)
    if echoes:
        assert back == echoes + hiccups
    else:  # the topic of a hiccup-only batch is "", and hiccups have none
        assert back == hiccups
    strings = sum(len(s.encode()) for s in (records[0].probe, records[0].cluster))
    strings += len(echoes[0].topic.encode()) if echoes else 0
    assert len(raw) == padded(HEADER.size + strings) + len(echoes) * 73 + len(hiccups) * 40


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(any_echo_rows(), min_size=1, max_size=12))
def test_each_echo_is_judged_like_the_same_echo_in_schema_v1(
    rows: list[tuple[dict[str, int], int]],
) -> None:
    raw = raw_batch([[c[k] for c, _ in rows] for k in ECHO_COLUMNS], [f for _, f in rows], [])
    got = decode_batch(raw)
    assert len(got) == len(rows)
    for (cols, flags), rec in zip(rows, got, strict=True):
        if flags & ~15:
            assert isinstance(rec, BadEcho) and rec.reason == "bad_type"
            continue
        want = v1_verdict(as_echo(cols, flags))
        assert (rec.reason if isinstance(rec, BadEcho) else None) == want, (cols, flags)
        if want is None:
            assert rec == as_echo(cols, flags)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(odd, odd, odd, odd, odd), min_size=1, max_size=8))
def test_each_hiccup_is_judged_like_the_same_hiccup_in_schema_v1(
    rows: list[tuple[int, int, int, int, int]],
) -> None:
    raw = raw_batch([], [], [list(col) for col in zip(*rows, strict=True)])
    for values, rec in zip(rows, decode_batch(raw), strict=True):
        want = v1_verdict(Hiccup("p", "c", *values))
        assert (rec.reason if isinstance(rec, BadEcho) else None) == want
        if want is None:
            assert rec == Hiccup("p", "c", *values)


GOOD = encode_batch([echo(1), echo(2), Hiccup("p1", "c", T0, T0 + 5, 3, 4, 2)])


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (GOOD[:-1], "bad_length"),  # truncated
        (GOOD + b"\0", "bad_length"),  # trailing bytes
        (MAGIC, "bad_length"),  # shorter than the header
        (GOOD[:4] + b"\x03" + GOOD[5:], "version"),
        (raw_batch([[0]] * 9, [0], [], version=1), "version"),
        (raw_batch([[0]] * 9, [0], [], reserved=(1, 0)), "bad_header"),
        (raw_batch([[0]] * 9, [0], [], reserved=(0, 7)), "bad_header"),
        (raw_batch([], [], [], (b"p", b"", b"")), "empty_batch"),
        (raw_batch([[0]] * 9, [0], [], (b"\xff", b"c", b"t")), "not_utf8"),
        (raw_batch([[0]] * 9, [0], [], (b"p", b"c", b"\xc3")), "not_utf8"),
        (GOOD[:8] + struct.pack("<I", 2**32 - 1) + GOOD[12:], "bad_length"),  # a huge count
        (MAGIC + bytes(MAX_BATCH_BYTES), "too_large"),
    ],
)
def test_a_bad_header_or_size_is_one_bad_record(raw: bytes, reason: str) -> None:
    assert [(type(r), getattr(r, "reason", None)) for r in decode_batch(raw)] == [(BadEcho, reason)]


def test_nonzero_padding_is_a_bad_header() -> None:
    raw = bytearray(GOOD)
    at = HEADER.size + len(b"p1c") + len(b"nines.probe")
    assert padded(at) > at
    raw[at] = 1
    assert [r.reason for r in decode_batch(bytes(raw))] == ["bad_header"]  # type: ignore[union-attr]


def test_the_layout_is_the_documented_one() -> None:
    """Offsets a reader in another language relies on (docs/echo-format.md)."""
    raw = encode_batch([echo(7, acked_us=None), Hiccup("p1", "c", T0, T0 + 5, 3, 4, 2)])
    assert raw[:4] == b"\x92N9E" and HEADER.size == 24
    assert struct.unpack_from("<HHIIHHHH", raw, 4) == (2, 0, 1, 1, 2, 1, 11, 0)
    assert raw[24:38] == b"p1cnines.probe" and raw[38:40] == b"\0\0"
    cols = struct.unpack_from("<14q", raw, 40)
    assert cols[:6] == (1, 1, 7, 512, T0 + 7, T0 + 12)
    assert cols[6] == 0 and cols[7] == T0 + 107  # acked_us absent: 0, its flag unset
    assert cols[9:] == (T0, T0 + 5, 3, 4, 2)
    assert raw[40 + 14 * 8 :] == bytes([0b0100])  # has received_us only
    assert len(raw) == 40 + ECHO_BYTES + HICCUP_BYTES
    h = read_header(raw)
    assert (h.echoes, h.hiccups, h.probe, h.cluster, h.topic, h.columns_at) == (
        1, 1, "p1", "c", "nines.probe", 40,
    )  # fmt: skip


def test_the_encoder_refuses_what_one_batch_cannot_hold() -> None:
    with pytest.raises(ValueError, match="1 to 10000 records"):
        encode_batch([])
    with pytest.raises(ValueError, match="one probe, cluster and topic"):
        encode_batch([echo(1), echo(2, topic="other")])
    with pytest.raises(ValueError, match="one probe, cluster and topic"):
        encode_batch([echo(1), Hiccup("p2", "c", T0, T0, 0, 0, 0)])
    full = encode_batch([echo(i) for i in range(MAX_BATCH_ECHOES)])
    assert len(full) <= MAX_BATCH_BYTES and len(decode_batch(full)) == MAX_BATCH_ECHOES
    with pytest.raises(ValueError):
        encode_batch([echo(i) for i in range(MAX_BATCH_ECHOES + 1)])


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.one_of(
        st.binary(max_size=300).map(lambda b: MAGIC + b),
        st.builds(
            lambda at, junk: GOOD[:at] + junk + GOOD[at + len(junk) :],
            st.integers(4, len(GOOD)),
            st.binary(min_size=1, max_size=12),
        ),
        st.integers(0, len(GOOD)).map(lambda k: GOOD[:k]),
    )
)
def test_any_bytes_after_the_magic_decode_to_records_or_known_reasons(raw: bytes) -> None:
    out = decode_batch(raw)
    assert out
    for rec in out:
        assert isinstance(rec, Echo | Hiccup | BadEcho)
        if isinstance(rec, BadEcho):
            assert rec.reason in BAD_REASONS
