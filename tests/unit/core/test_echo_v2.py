"""Echo format v2: the reference codec round-trips, and judges each record as schema v1 would."""

from __future__ import annotations

import dataclasses
import struct

import pytest
from echo_batches import T0, any_echo_rows, as_echo, echo, good_batches, odd, raw_batch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.echo import (
    BAD_REASONS,
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
    MAGIC,
    MAX_BATCH_BYTES,
    MAX_BATCH_ECHOES,
    decode_batch,
    encode_batch,
    is_v2,
    padded,
    read_header,
)


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
        (raw_batch([[0]] * 9, [0], [], reserved=(4, 0)), "system"),  # no fifth system
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
    with pytest.raises(ValueError, match="one probe, cluster, system and topic"):
        encode_batch([echo(1), echo(2, topic="other")])
    with pytest.raises(ValueError, match="one probe, cluster, system and topic"):
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


def test_the_reader_in_the_docs_reads_what_the_encoder_writes() -> None:
    """docs/echo-format.md's few-line reader is what another language would do."""
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[3] / "docs" / "echo-format.md").read_text()
    code = doc.split("```python\n", 1)[1].split("```", 1)[0]
    scope: dict[str, object] = {}
    exec(code, scope)
    lost = echo(2, acked_us=None, received_us=None, lost=True, timeout_us=30_000_000)
    raw = encode_batch([echo(1), lost, Hiccup("p1", "c", T0, T0 + 5, 3, 4, 2)])
    probe, cluster, topic, cols, hics, flags = scope["read_v2"](raw)  # type: ignore[operator]
    assert (probe, cluster, topic) == (b"p1", b"c", b"nines.probe")
    assert dict(zip(ECHO_COLUMNS, cols, strict=True))["seq"] == (1, 2)
    assert dict(zip(ECHO_COLUMNS, cols, strict=True))["timeout_us"] == (0, 30_000_000)
    assert hics == [(T0,), (T0 + 5,), (3,), (4,), (2,)]
    assert flags == bytes([0b0110, 0b1001])


@pytest.mark.parametrize("system", ["kafka", "nats", "redis", "rabbitmq"])
def test_the_system_travels_in_the_header(system: str) -> None:
    """A non-Kafka probe's v2 echoes keep their system, as v1's ``system`` field does."""
    e = dataclasses.replace(echo(1), system=system)
    (got,) = decode_batch(encode_batch([e]))
    assert got == e and got.system == system
    with pytest.raises(ValueError, match="one probe, cluster, system and topic"):
        encode_batch(
            [e, dataclasses.replace(echo(2), system="nats" if system != "nats" else "redis")]
        )
