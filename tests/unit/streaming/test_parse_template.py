"""The template path (echoes in the probes' own layout, read with numpy) agrees with the reference.

Every row is compared, values included, with ``streaming.parse.v1_json._slow``
(``core.echo.decode_record`` row by row): records as ``encode_record`` writes them, edge values
included, and the same bytes mutated (a byte replaced, dropped, doubled; a stretch cut out),
which must be left to the other path or read exactly as the reference reads them.
"""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from core.echo import (
    MAX_ECHO_BYTES,
    MAX_EPOCH_US,
    MIN_EPOCH_US,
    SYSTEMS,
    Echo,
    Hiccup,
    encode_record,
)
from core.labels import MAX_LABEL_BYTES
from streaming.parse import parse_values
from streaming.parse.v1_json import _slow
from streaming.parse.v1_template import template_rows

T0 = 1_795_000_000_000_000

edge_int = st.one_of(
    st.integers(-2, 12),
    st.sampled_from([10**17 - 1, 10**17, 10**18 - 1, 10**18, 2**63 - 1, 2**63, -(2**63) - 1]),
    st.integers(0, 2**64),
)
edge_time = st.one_of(
    st.integers(T0 - 10, T0 + 10**9),
    st.sampled_from([MIN_EPOCH_US - 1, MIN_EPOCH_US, MAX_EPOCH_US, MAX_EPOCH_US + 1, 0, -1]),
)
label = st.one_of(
    st.sampled_from(["p", "c", "t", "", "nines.probe", "a b", 'q"', "b\\s", "\u00e9", "\x7f"]),
    st.text(max_size=8),
    st.sampled_from([f"x{'y' * (MAX_LABEL_BYTES['topic'] + k)}" for k in (-2, -1, 0)]),
)
echo_st = st.builds(
    Echo,
    probe=label,
    cluster=label,
    topic=label,
    partition=edge_int,
    leader=edge_int,
    seq=edge_int,
    size=edge_int,
    intended_us=edge_time,
    sent_us=edge_time,
    acked_us=st.one_of(st.none(), edge_time),
    received_us=st.one_of(st.none(), edge_time),
    lost=st.booleans(),
    timeout_us=st.one_of(st.none(), edge_int),
    system=st.one_of(st.sampled_from(SYSTEMS), st.sampled_from(["", "kafkaa", "NATS"])),
)


def good_echo(seq: int, system: str = "kafka", lost: bool = False) -> Echo:
    return Echo("p", "c", "t", seq % 3, 1, seq, 512, T0 + seq, T0 + seq + 3, T0 + seq + 9,
                None if lost else T0 + seq + 20, lost, 30_000_000 if lost else None,
                system=system)  # fmt: skip


@st.composite
def mutated(draw: st.DrawFn) -> bytes:
    raw = encode_record(draw(st.one_of(echo_st, st.builds(good_echo, st.integers(0, 10**6)))))
    kind = draw(st.sampled_from(["none", "replace", "drop", "double", "cut"]))
    at = draw(st.integers(0, len(raw) - 1))
    if kind == "replace":
        byte = draw(st.one_of(st.sampled_from(b'"\\{}[],: 0123456789-.enlsu\x00\n\xff'),
                              st.integers(0, 255)))  # fmt: skip
        return raw[:at] + bytes([byte]) + raw[at + 1 :]
    if kind == "drop":
        return raw[:at] + raw[at + 1 :]
    if kind == "double":
        return raw[:at] + raw[at : at + 1] + raw[at:]
    if kind == "cut":
        return raw[:at] + raw[at + draw(st.integers(1, 40)) :]
    return raw


def assert_agrees(raws: Sequence[bytes | None]) -> None:
    assert parse_values(raws).to_pylist() == _slow(raws).to_pylist()


@settings(max_examples=300, deadline=None)
@given(st.lists(echo_st, min_size=1, max_size=30))
def test_probe_layout_agrees_with_reference(echoes: list[Echo]) -> None:
    assert_agrees([encode_record(e) for e in echoes])


@settings(max_examples=400, deadline=None)
@given(st.lists(mutated(), min_size=1, max_size=30), st.booleans())
def test_mutated_layout_agrees_with_reference(raws: list[bytes | None], odd: bool) -> None:
    if odd:  # what the template path leaves to the other one, in the same batch
        raws = [*raws, None, b"", b"{}", encode_record(Hiccup("p", "c", T0, T0 + 1, 1, 1, 1))]
    assert_agrees(raws)


def test_probe_layout_is_read_without_the_json_reader() -> None:
    """Good echoes as the probes write them (any system, lost or not) all take the template."""
    raws = [encode_record(good_echo(i, SYSTEMS[i % 4], lost=i % 5 == 0)) for i in range(200)]
    rows, taken = template_rows(raws)
    assert taken.all()
    assert rows.to_pylist() == _slow(raws).to_pylist()
    # one odd record in the batch does not send the others elsewhere
    raws[7] = raws[7].replace(b'"seq"', b'"seq" ')
    rows, taken = template_rows(raws)
    assert taken.sum() == 199 and not taken[7]
    assert_agrees(raws)
    # nor does a long one (never scanned here: 64 KiB of quotes is 512 KiB of positions)
    raws[9] = b'"' * MAX_ECHO_BYTES
    rows, taken = template_rows(raws)
    assert taken.sum() == 198 and not taken[9]
    assert_agrees(raws)


def test_hand_made_values_agree_with_reference() -> None:
    """Values in the probes' layout that only a JSON parser tells apart, one record each."""
    raw = encode_record(good_echo(5))
    numbers = [b"0", b"05", b"00", b"-0", b"+5", b"5.0", b"5e0", b"5E0", b" 5", b"5 ", b"null",
               b"true", b'"5"', b"-5", b"-1", b"--1", b"-01", b"9" * 18, b"9" * 19,
               b"1" + b"0" * 18, b"0x5", "\u0665".encode(), b"\xef\xbc\x95", b"", b"nul", b"NaN",
               b"Infinity", b"[5]", b"{}", b"5,", b",5"]  # fmt: skip
    raws: list[bytes | None] = []
    for key in (b"partition", b"leader", b"seq", b"acked_us", b"timeout_us"):
        head, _, rest = raw.partition(b'"' + key + b'":')
        tail = rest[rest.index(b",") :]
        raws += [head + b'"' + key + b'":' + x + tail for x in numbers]
    for word in (b"true", b"false", b"True", b"tru", b"falsee", b"null", b"0", b"1"):
        raws.append(raw.replace(b'"lost":false', b'"lost":' + word))
    for text in (b"", b"\\u0041", b"\\\\", b"\\n", b"\t", b"a\x7fb", b"\xc3\xa9", b"\xff"):
        raws.append(raw.replace(b'"cluster":"c"', b'"cluster":"' + text + b'"'))
        raws.append(raw.replace(b'"type":"echo"', b'"type":"echo","system":"' + text + b'"'))
    raws += [
        raw + b" ",
        b" " + raw,
        raw[:-1] + b',"system":"nats"}',
        raw.replace(b'"v":1', b'"v":2'),
    ]
    raws += [raw.replace(b'"seq"', b'"sex"'), raw.replace(b'"echo"', b'"hiccup"'), raw + raw]
    assert_agrees(raws)
