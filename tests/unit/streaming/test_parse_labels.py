"""Labels are bounded: a probe, cluster or topic longer than ``core.labels`` is a counted bad echo
(``label_too_long``), in v1 and v2, and the fast paths agree with the references row by row."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.echo import BAD_REASONS, BadEcho, Echo, Hiccup, decode_record, encode_record
from core.echo_v2 import decode_batch, encode_batch
from core.labels import MAX_LABEL_BYTES, label_bytes
from streaming.parse import parse_messages, parse_values

T0 = 1_800_000_000_000_000
FIELDS = list(MAX_LABEL_BYTES)


def echo(probe: str = "p", cluster: str = "c", topic: str = "t", seq: int = 0) -> Echo:
    return Echo(probe, cluster, topic, 0, 1, seq, 10, T0 + seq, T0 + seq + 1, None, T0 + seq + 9)


def hiccup(probe: str = "p", cluster: str = "c") -> Hiccup:
    return Hiccup(probe, cluster, T0, T0 + 5, 3, 4, 2)


@st.composite
def labels(draw: st.DrawFn, field: str) -> str:
    """A value near the field's limit in bytes: ASCII, or with 2- to 4-byte characters."""
    limit = MAX_LABEL_BYTES[field]
    unit = draw(st.sampled_from(["a", "é", "€", "😀"]))
    per = len(unit.encode())
    n = draw(st.integers(max(0, (limit - 8) // per), limit // per + 3))
    return draw(st.sampled_from(["", "x"])) + unit * n


def reference(raw: bytes) -> tuple[str, str | None]:
    try:
        rec = decode_record(raw)
    except BadEcho as exc:
        return "bad", exc.reason
    return ("hiccup" if isinstance(rec, Hiccup) else "echo"), None


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_v1_a_label_over_its_limit_is_label_too_long_in_both_paths(data: st.DataObject) -> None:
    values: list[bytes | None] = []
    want: list[str | None] = []
    for _ in range(data.draw(st.integers(1, 6))):
        field = data.draw(st.sampled_from(FIELDS))
        value = data.draw(labels(field))
        kind = data.draw(
            st.sampled_from(["echo", "hiccup"]) if field != "topic" else st.just("echo")
        )
        rec = echo(**{field: value}) if kind == "echo" else hiccup(**{field: value})
        values.append(encode_record(rec))
        want.append("label_too_long" if label_bytes(value) > MAX_LABEL_BYTES[field] else None)
    rows = parse_values(values).to_pylist()
    assert [r["reason"] for r in rows] == want
    for raw, row in zip(values, rows, strict=True):
        assert raw is not None
        assert (row["rtype"], row["reason"]) == reference(raw)


def test_v1_exactly_at_the_limit_is_good_and_one_byte_over_is_bad() -> None:
    for field, limit in MAX_LABEL_BYTES.items():
        at = encode_record(echo(**{field: "a" * limit}))
        over = encode_record(echo(**{field: "a" * (limit + 1)}))
        # an escaped character counts as what it decodes to: "\u00e9" is two bytes
        escaped = encode_record(echo(**{field: "é" * (limit // 2 + 1)}))
        assert b"\\u00e9" in escaped
        rows = parse_values([at, over, escaped]).to_pylist()
        assert [r["reason"] for r in rows] == [None, "label_too_long", "label_too_long"]
        if field != "probe":  # the parsed rows carry cluster and topic, not the probe
            assert rows[0][field] == "a" * limit
        with pytest.raises(BadEcho, match=f"^label_too_long: {field} over {limit} bytes$"):
            decode_record(over)


def test_v1_a_64_kib_cluster_never_reaches_a_label() -> None:
    raw = encode_record(echo(cluster="c" * (60 * 1024)))
    assert json.loads(raw)["cluster"] == "c" * (60 * 1024)
    row = parse_values([raw]).to_pylist()[0]
    assert (row["rtype"], row["reason"], row["cluster"]) == ("bad", "label_too_long", None)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_v2_a_batch_with_a_long_label_is_every_record_bad_in_both_paths(
    data: st.DataObject,
) -> None:
    field = data.draw(st.sampled_from(FIELDS))
    value = data.draw(labels(field))
    n = data.draw(st.integers(1, 5))
    m = data.draw(st.integers(0, 2))
    strings = {field: value}
    records: list[Echo | Hiccup] = [echo(**strings, seq=i) for i in range(n)]
    records += [hiccup(**{k: v for k, v in strings.items() if k != "topic"}) for _ in range(m)]
    good = encode_batch([echo(seq=7)])
    batch = encode_batch(records)
    long = label_bytes(value) > MAX_LABEL_BYTES[field]
    ref = decode_batch(batch)
    assert len(ref) == n + m
    assert all(isinstance(r, BadEcho) and r.reason == "label_too_long" for r in ref) == long
    parsed, index = parse_messages([good, batch, encode_record(echo(seq=8))])
    rows = parsed.to_pylist()
    assert index.tolist() == [0, *[1] * (n + m), 2]
    got = [r["reason"] for r in rows[1:-1]]
    assert got == (["label_too_long"] * (n + m) if long else [None] * (n + m))
    assert rows[0]["rtype"] == rows[-1]["rtype"] == "echo"


def test_the_reason_is_documented_and_exported() -> None:
    from pathlib import Path

    assert "label_too_long" in BAD_REASONS
    root = Path(__file__).resolve().parents[3]
    for doc in ("docs/echo-format.md", "docs/metrics.md"):
        assert "label_too_long" in (root / doc).read_text(), doc
    for limit in MAX_LABEL_BYTES.values():
        assert f"**{limit}**" in (root / "docs/echo-format.md").read_text()
