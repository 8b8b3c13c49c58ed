"""Echo schema v1 and unit parsing: the public contract and the user-facing input."""

from __future__ import annotations

import json

import pytest

from core.echo import BadEcho, Echo, Hiccup, decode_record, encode_record
from core.units import format_duration, parse_duration_s, parse_rate, parse_size_bytes

T0 = 1_795_000_000_000_000


def echo(**kw: object) -> Echo:
    base = dict(
        probe="p1",
        cluster="c",
        topic="nines.probe",
        partition=0,
        leader=1,
        seq=7,
        size=512,
        intended_us=T0,
        sent_us=T0 + 10,
        acked_us=T0 + 900,
        received_us=T0 + 1500,
    )
    base.update(kw)
    return Echo(**base)  # type: ignore[arg-type]


def test_roundtrip_and_latencies() -> None:
    e = echo()
    back = decode_record(encode_record(e))
    assert back == e
    assert (e.end_to_end_us, e.publish_us, e.send_lag_us) == (1500, 900, 10)
    lost = echo(received_us=None, lost=True, timeout_us=30_000_000)
    assert decode_record(encode_record(lost)).end_to_end_us == 30_000_000
    h = Hiccup(
        probe="p1",
        cluster="c",
        start_us=T0,
        end_us=T0 + 1_000_000,
        max_us=50,
        total_us=80,
        count=990,
    )
    assert decode_record(encode_record(h)) == h


@pytest.mark.parametrize(
    ("mutate", "reason"),
    [
        (lambda d: "{not json", "not_json"),
        (lambda d: {**d, "v": 2}, "version"),
        (lambda d: {**d, "type": "nope"}, "type"),
        (lambda d: {k: v for k, v in d.items() if k != "seq"}, "missing_field"),
        (lambda d: {**d, "seq": "7"}, "bad_type"),
        (lambda d: {**d, "seq": -1}, "negative"),
        (lambda d: {**d, "intended_us": 12}, "absurd_time"),
        (lambda d: {**d, "received_us": T0 - 1}, "order"),
        (lambda d: {**d, "received_us": None}, "missing_field"),
    ],
)
def test_bad_records_have_reasons(mutate, reason: str) -> None:  # type: ignore[no-untyped-def]
    d = json.loads(encode_record(echo()))
    bad = mutate(d)
    raw = bad if isinstance(bad, str) else json.dumps(bad)
    with pytest.raises(BadEcho) as err:
        decode_record(raw)
    assert err.value.reason == reason


def test_units() -> None:
    assert parse_duration_s("250ms") == 0.25
    assert parse_duration_s("1m30s") == 90
    assert parse_duration_s("2h") == 7200
    assert parse_duration_s(5) == 5
    assert (
        format_duration(60) == "1m"
        and format_duration(10) == "10s"
        and format_duration(0.25) == "250ms"
    )
    assert parse_size_bytes("1KiB") == 1024 and parse_size_bytes("512") == 512
    assert parse_rate("100/s") == 100 and parse_rate("6000/m") == 100
    for bad in ("ten", "10x", "-5s", ""):
        with pytest.raises(ValueError):
            parse_duration_s(bad)
    with pytest.raises(ValueError):
        parse_size_bytes("1 parsec")
    with pytest.raises(ValueError):
        parse_rate("fast")
