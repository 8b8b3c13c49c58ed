"""The soak's bookkeeping: a missing or duplicated echo cannot hide in a count."""

from __future__ import annotations

import math

from bench.control_hiccup import oversleeps_us, summary
from bench.samples import quantiles
from bench.soak import SeqBook


def test_seq_book_counts_missing_and_duplicates_per_partition() -> None:
    book = SeqBook()
    for seq in (0, 1, 2, 4, 70_000):  # 3 missing below 5; growth past the first block
        book.add(0, seq)
    book.add(1, 0)
    book.add(1, 0)
    assert book.duplicates == 1
    assert book.missing_below({0: 5, 1: 1}) == 1
    assert book.missing_below({0: 70_001}) == 70_001 - 5
    assert book.missing_below({2: 3}) == 3  # a partition never seen: all missing


def test_quantiles_are_nearest_rank() -> None:
    assert quantiles([]) is None
    q = quantiles(list(range(1, 1001)))
    assert q == {"p50": 500, "p99": 990, "p999": 999, "max": 1000}


def test_control_hiccup_measures_oversleep() -> None:
    values = oversleeps_us(0.2)
    # 1 ms ticks, never faster, that fill the 0.2 s however late they wake (at nice 19 beside
    # a loaded CI-like run, 65 ticks): each is its 1 ms and its oversleep, and the last one is
    # the first to end within 1 ms of the end (µs floors lose < 1 µs a tick)
    ticks_us = [1000 + v for v in values]
    assert len(values) <= 200 and sum(ticks_us[:-1]) < 199_000 <= sum(ticks_us) + len(values)
    s = summary(values)
    srt = sorted(values)
    at = lambda q: srt[math.ceil(q * len(srt)) - 1]  # noqa: E731  nearest rank
    assert s == {
        "samples": len(values),
        "p50": at(0.5),
        "p99": at(0.99),
        "p999": at(0.999),
        "max": srt[-1],
        "over_1ms": sum(v > 1000 for v in values),
    }
    assert summary([7, 1, 1500, 3]) == {
        "samples": 4, "p50": 3, "p99": 1500, "p999": 1500, "max": 1500, "over_1ms": 1
    }  # fmt: skip
    assert summary([]) == {"samples": 0}
