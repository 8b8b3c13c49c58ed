"""The vectorised parser agrees with the reference decoder on good and bad records."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from core.echo import BadEcho, Echo, Hiccup, decode_record, encode_record
from streaming.config import StreamConfig
from streaming.parse import parse_values

T0 = 1_795_000_000_000_000

echo_st = st.builds(
    lambda p, seq, lat, lost, acked: Echo(
        "p",
        "c",
        "t",
        p,
        1,
        seq,
        512,
        T0 + seq,
        T0 + seq + 3,
        None if acked is None else T0 + seq + acked,
        None if lost else T0 + seq + lat,
        lost,
        30_000_000 if lost else None,
    ),
    st.integers(0, 5),
    st.integers(0, 10**6),
    st.integers(0, 10**8),
    st.booleans(),
    st.one_of(st.none(), st.integers(0, 10**7)),
)
mutation_st = st.sampled_from(
    [
        None,
        lambda d: {**d, "v": 2},
        lambda d: {**d, "type": "other"},
        lambda d: {k: v for k, v in d.items() if k != "topic"},
        lambda d: {k: v for k, v in d.items() if k != "intended_us"},
        lambda d: {**d, "seq": "x"},
        lambda d: {**d, "seq": -3},
        lambda d: {**d, "leader": -1},
        lambda d: {**d, "sent_us": 5},
        lambda d: {**d, "sent_us": d["intended_us"] - 1},
        lambda d: {**d, "lost": "yes"},
        lambda d: {**d, "extra": [1, 2]},
    ]
)


def reference(raw: bytes) -> tuple[str, str | None]:
    try:
        rec = decode_record(raw)
    except BadEcho as exc:
        return ("bad", exc.reason)
    return ("hiccup" if isinstance(rec, Hiccup) else "echo", None)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(echo_st, mutation_st), min_size=1, max_size=40), st.booleans())
def test_parse_agrees_with_reference(items, with_garbage: bool) -> None:  # type: ignore[no-untyped-def]
    raws = []
    for echo, mutate in items:
        d = json.loads(encode_record(echo))
        raws.append(json.dumps(mutate(d) if mutate else d).encode())
    if with_garbage:
        raws.insert(len(raws) // 2, b"{not json")
    raws.append(encode_record(Hiccup("p", "c", T0, T0 + 10, 5, 9, 3)))
    batch = parse_values(raws)
    got = list(
        zip(batch.column("rtype").to_pylist(), batch.column("reason").to_pylist(), strict=True)
    )
    assert got == [reference(r) for r in raws]
    for raw, row in zip(raws, batch.to_pylist(), strict=True):
        if row["rtype"] == "echo":
            e = decode_record(raw)
            assert isinstance(e, Echo)
            assert (row["intended_us"], row["received_us"], row["lost"]) == (
                e.intended_us,
                e.received_us,
                e.lost,
            )


def test_stream_config_validation() -> None:
    cfg = StreamConfig(bootstrap="x:1", windows="1m, 10s,1h")
    assert cfg.windows == ("10s", "1m", "1h") and cfg.finest_us == 10_000_000
    import pytest

    from core.config import ConfigError, build

    for values, field in (
        ({"windows": "10s,15s"}, "stream.windows"),
        ({"digits": 5}, "stream.digits"),
        ({"watermark": "soon"}, "stream.watermark"),
        ({"source": "python"}, "stream.source"),  # removed: an unknown key now
    ):
        with pytest.raises(ConfigError) as err:
            build(StreamConfig, {"bootstrap": "x:1", **values}, prefix="stream")
        assert str(err.value).startswith(field)
