"""A probe fleet's echoes merge to one probe's: the same schedule and latencies, probed by one
probe or split among three replicas by partition and time (as a fleet's group hands partitions
over), give the same histograms per window, partition and broker, and so the same quantiles.

The reader keys its partial histograms by window, cluster, topic, partition, send-time leader
and kind (``streaming.state_keys.SUBJECT``): never by probe, so replicas' echoes of one
partition land in one histogram. This checks that through the real path: v2 batches (one per
replica, as each replica publishes its own) → ``parse_values`` → ``mark_late`` → ``combine``.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict

import numpy as np

from core.echo import Echo
from core.echo_v2 import encode_batch
from core.hdr import HdrLayout, SparseHistogram
from core.windows import WindowSpec
from streaming.combine import combine
from streaming.combine import histograms as partial_histograms
from streaming.marks import mark_late
from streaming.parse import parse_values
from streaming.state_keys import SUBJECT
from streaming.wire import decode

T0 = 1_800_000_000_000_000 - 1_800_000_000_000_000 % 3_600_000_000
SPEC = WindowSpec.from_names("10s,1m,1h")
LAYOUT = HdrLayout(digits=2)
PARTITIONS, RATE, SECONDS = 6, 20, 120
QUANTILES = (0.5, 0.9, 0.99, 0.999, 1.0)


def schedule() -> list[Echo]:
    """One probe's echoes of an open-loop schedule: lognormal latencies, a few lost."""
    rng = np.random.default_rng(39)
    out = []
    for p in range(PARTITIONS):
        for seq in range(RATE * SECONDS):
            intended = T0 + p * 1_000 + seq * 1_000_000 // RATE
            lost = rng.random() < 0.002
            e2e = int(rng.lognormal(8.5, 0.8))
            out.append(
                Echo(
                    probe="solo", cluster="c", topic="nines.probe", partition=p,
                    leader=p % 3 + 1, seq=seq, size=512, intended_us=intended,
                    sent_us=intended + int(rng.integers(5, 200)),
                    acked_us=intended + e2e // 2, received_us=None if lost else intended + e2e,
                    lost=lost, timeout_us=30_000_000 if lost else None,
                )
            )  # fmt: skip
    return out


def owner(e: Echo) -> str:
    """The replica that probed ``e``: ownership moves every 7 s, partition by partition."""
    return f"replica-{(e.partition + (e.intended_us - T0) // 7_000_000) % 3}"


def batches(echoes: list[Echo]) -> list[bytes]:
    """Each probe's echoes in batches of up to 500, the replicas' batches interleaved."""
    by_probe: dict[str, list[Echo]] = defaultdict(list)
    for e in echoes:
        by_probe[e.probe].append(e)
    per = [
        [encode_batch(es[i : i + 500]) for i in range(0, len(es), 500)] for es in by_probe.values()
    ]
    return [b for group in zip(*per, strict=False) for b in group] + [
        b for group in per for b in group[min(map(len, per)) :]
    ]


def histograms(
    echoes: list[Echo],
) -> tuple[dict[tuple[object, ...], SparseHistogram], dict[tuple[object, ...], int]]:
    """Window and subject → the merged histogram the reader hands Spark, and its lost count."""
    lost_of: dict[tuple[object, ...], int] = {}
    parsed = mark_late(parse_values(batches(echoes)), SPEC, 0)
    partials = partial_histograms(combine(parsed, SPEC, LAYOUT)).to_pylist()
    out: dict[tuple[object, ...], SparseHistogram] = {}
    for row in partials:
        key = (row["window_end_us"], *(row[k] for k in SUBJECT))
        lost, max_us, sum_us, buckets, counts = decode(row["hist"])
        h = SparseHistogram.from_counts(LAYOUT, buckets, counts, max_us, sum_us)
        out[key] = out[key].merge(h) if key in out else h
        lost_of[key] = lost_of.get(key, 0) + lost
    return out, lost_of


def test_three_replicas_and_one_probe_give_the_same_histograms_and_quantiles() -> None:
    solo = schedule()
    fleet = [dataclasses.replace(e, probe=owner(e)) for e in solo]
    assert len({e.probe for e in fleet}) == 3
    (one, lost_one), (many, lost_many) = histograms(solo), histograms(fleet)
    assert len(one) > PARTITIONS * (SECONDS // 10) and one.keys() == many.keys()
    assert lost_one == lost_many and sum(lost_one.values()) > 0
    for key, h in one.items():
        m = many[key]
        assert (h.total, h.max_us, h.sum_us) == (m.total, m.max_us, m.sum_us), key
        assert h.values_at_quantiles(QUANTILES) == m.values_at_quantiles(QUANTILES), key
    # and merged over every window, per partition and per broker, as the coarser windows are
    for field in ("partition", "leader"):
        whole_one, whole_many = over_windows(one, field), over_windows(many, field)
        assert whole_one.keys() == whole_many.keys()
        for k, h in whole_one.items():
            got = whole_many[k].values_at_quantiles(QUANTILES)
            assert h.values_at_quantiles(QUANTILES) == got, (field, k)


def over_windows(
    hists: dict[tuple[object, ...], SparseHistogram], field: str
) -> dict[tuple[object, object], SparseHistogram]:
    """(the ``field`` of the subject, kind) → the histograms of every window merged."""
    at, kind = 1 + SUBJECT.index(field), 1 + SUBJECT.index("kind")
    out: dict[tuple[object, object], SparseHistogram] = {}
    for key, h in hists.items():
        k = (key[at], key[kind])
        out[k] = out[k].merge(h) if k in out else h
    return out
