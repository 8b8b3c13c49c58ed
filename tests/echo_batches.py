"""Echo format v2 test helpers: batches of any records, and batches written byte by byte."""

from __future__ import annotations

import struct
from typing import Any

from hypothesis import strategies as st

from core.echo import MAX_EPOCH_US, MIN_EPOCH_US, Echo, Hiccup
from core.echo_v2 import HEADER, MAGIC, padded

T0 = 1_800_000_000_000_000
times = st.integers(MIN_EPOCH_US, MAX_EPOCH_US - 10**12)
small = st.integers(0, 10**9)
#: Any int64, with the edges every check has, so bad records are common.
EDGES = [-(2**63), -(10**6), -2, -1, 0, 1, MIN_EPOCH_US - 1, MIN_EPOCH_US, T0, MAX_EPOCH_US]
odd = st.sampled_from([*EDGES, MAX_EPOCH_US + 1, 2**63 - 1]) | st.integers(-(2**63), 2**63 - 1)


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
                draw(st.none() | small.map(lambda d, t=t: t + d)),
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
