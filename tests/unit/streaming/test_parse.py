"""The vectorised parser agrees with the reference ``decode_record`` on every record."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.echo import (
    MAX_EPOCH_US,
    MIN_EPOCH_US,
    BadEcho,
    Echo,
    Hiccup,
    decode_record,
    encode_record,
)
from streaming.parse import parse_values
from streaming.parse.v1_json import CHUNK

T0 = 1_800_000_000_000_000
times = st.integers(MIN_EPOCH_US, MAX_EPOCH_US - 10**12)
small = st.integers(0, 10**9)


@st.composite
def echoes(draw: Any) -> Echo:
    intended = draw(times)
    lost = draw(st.booleans())
    received = None if lost else intended + draw(small)
    return Echo(
        probe=draw(st.text(max_size=8)),
        cluster=draw(st.sampled_from(["a", "b", "ü-c"])),
        topic=draw(st.text(max_size=8)),
        partition=draw(st.integers(0, 100)),
        leader=draw(st.integers(-1, 5)),
        seq=draw(small),
        size=draw(small),
        intended_us=intended,
        sent_us=intended + draw(small),
        acked_us=draw(st.none() | small.map(lambda d: intended + d)),
        received_us=received,
        lost=lost,
        timeout_us=draw(small) if lost else draw(st.none() | small),
    )


@st.composite
def hiccups(draw: Any) -> Hiccup:
    start = draw(times)
    return Hiccup(
        probe=draw(st.text(max_size=8)),
        cluster=draw(st.text(max_size=4)),
        start_us=start,
        end_us=start + draw(small),
        max_us=draw(small),
        total_us=draw(small),
        count=draw(small),
    )


ODD_VALUES = st.sampled_from(
    [None, -1, -(10**6), 0, 1.5, 1.0, "7", True, False, [], {}, 10**20, 5, MIN_EPOCH_US - 1]
)
FIELDS = [
    "v", "type", "probe", "cluster", "topic", "partition", "leader", "seq", "size",
    "intended_us", "sent_us", "acked_us", "received_us", "lost", "timeout_us",
    "start_us", "end_us", "max_us", "total_us", "count", "extra",
]  # fmt: skip


@st.composite
def mutated(draw: Any) -> bytes:
    """A record with a few fields dropped or replaced by odd values, or not JSON at all."""
    what = draw(st.sampled_from(["echo", "hiccup", "raw"]))
    if what == "raw":
        return draw(
            st.sampled_from([b"", b"garbage", b"[1,2]", b"null", b"{", b'"s"', b"\xff\xfe", b"{}"])
        )
    obj = json.loads(encode_record(draw(echoes() if what == "echo" else hiccups())))
    for _ in range(draw(st.integers(1, 3))):
        name = draw(st.sampled_from(FIELDS))
        if draw(st.booleans()) and name in obj:
            del obj[name]
        else:
            obj[name] = draw(ODD_VALUES)
    return json.dumps(obj).encode()


def reference(raw: bytes) -> dict[str, Any]:
    """What the parser must say about one record, from ``decode_record``."""
    try:
        rec = decode_record(raw)
    except BadEcho as exc:
        return {"rtype": "bad", "reason": exc.reason}
    fields = [getattr(rec, f) for f in rec.__slots__]  # type: ignore[union-attr]
    if any(isinstance(v, int) and abs(v) >= 2**63 for v in fields):
        # the one deliberate difference: a column is int64, so a larger JSON integer is bad_type
        return {"rtype": "bad", "reason": "bad_type"}
    if isinstance(rec, Hiccup):
        return {
            "rtype": "hiccup",
            "cluster": rec.cluster,
            "topic": "",
            "leader": None,
            "intended_us": rec.start_us,
            "max_us": rec.max_us,
        }
    return {
        "rtype": "echo",
        "reason": None,
        "cluster": rec.cluster,
        "topic": rec.topic,
        "partition": rec.partition,
        "leader": rec.leader,  # the send-time leader: the stream job's per-broker key
        "intended_us": rec.intended_us,
        "sent_us": rec.sent_us,
        "acked_us": rec.acked_us,
        "received_us": rec.received_us,
        "lost": rec.lost,
        "timeout_us": rec.timeout_us,
    }


def check(values: list[bytes]) -> None:
    rows = parse_values(values).to_pylist()
    assert len(rows) == len(values)
    for raw, row in zip(values, rows, strict=True):
        want = reference(raw)
        assert {k: row[k] for k in want} == want, raw


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(echoes() | hiccups(), min_size=1, max_size=20))
def test_good_records_parse_like_the_reference(records: list[Echo | Hiccup]) -> None:
    check([encode_record(r) for r in records])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(mutated() | echoes().map(encode_record), min_size=1, max_size=12))
def test_bad_and_mixed_records_get_the_reference_reason(values: list[bytes]) -> None:
    check(values)


def test_every_reason_is_reachable_and_matches() -> None:
    good = json.loads(encode_record(Echo("p", "c", "t", 0, 1, 0, 10, T0, T0 + 1, T0 + 2, T0 + 3)))
    cases = [
        ("not_json", b"{nope"),
        ("version", json.dumps({**good, "v": 2}).encode()),
        ("type", json.dumps({**good, "type": "other"}).encode()),
        ("missing_field", json.dumps({k: v for k, v in good.items() if k != "seq"}).encode()),
        ("bad_type", json.dumps({**good, "lost": None}).encode()),
        ("bad_type", json.dumps({**good, "seq": 2**64}).encode()),  # beyond int64
        ("negative", json.dumps({**good, "size": -1}).encode()),
        ("absurd_time", json.dumps({**good, "sent_us": 5}).encode()),
        ("order", json.dumps({**good, "received_us": T0 - 1}).encode()),
    ]
    rows = parse_values([raw for _, raw in cases]).to_pylist()
    assert [r["reason"] for r in rows] == [reason for reason, _ in cases]
    assert all(r["rtype"] == "bad" for r in rows)


def test_large_batches_keep_order_across_chunks() -> None:
    records = [
        encode_record(Echo("p", "c", "t", i % 7, 1, i, 10, T0 + i, T0 + i, None, T0 + 2 * i))
        for i in range(2 * CHUNK + 5)
    ]
    records[CHUNK + 3] = b"not json"
    rows = parse_values(records).to_pylist()
    assert len(rows) == len(records)
    assert rows[CHUNK + 3]["reason"] == "not_json"
    assert [r["partition"] for i, r in enumerate(rows) if i != CHUNK + 3] == [
        i % 7 for i in range(len(records)) if i != CHUNK + 3
    ]
    assert rows[-1]["received_us"] == T0 + 2 * (len(records) - 1)


def test_good_echoes_take_the_fast_path_with_or_without_a_system(monkeypatch: Any) -> None:
    """The vectorised path must accept every good echo: the reference is ~10× slower (a
    null-blind ``system`` check once sent every chunk there, halving the job's throughput)."""
    import streaming.parse.v1_json as parse_mod
    from core.echo import Echo, encode_record
    from streaming.parse import parse_values

    def no_slow_path(values: Any) -> Any:
        raise AssertionError(f"{len(values)} good records went to the reference parser")

    monkeypatch.setattr(parse_mod, "_slow", no_slow_path)
    t0 = 1_795_000_000_000_000
    values = [
        encode_record(Echo("p", "c", "t", i % 3, 1, i, 512, t0 + i, t0 + i + 30, t0 + i + 900,
                           t0 + i + 2000, system=system))
        for i, system in enumerate(["kafka", "nats", "redis", "rabbitmq"] * 50)
    ]  # fmt: skip
    rows = parse_values(values)
    assert rows.column("rtype").to_pylist() == ["echo"] * 200
    assert rows.column("system").to_pylist()[:4] == ["kafka", "nats", "redis", "rabbitmq"]
