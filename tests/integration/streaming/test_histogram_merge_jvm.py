"""``wire.encode``'s bytes merged by the Java ``HistogramMerge`` directly, read back by ``decode``.

The state histogram encoding is specified once (``streaming.wire``'s docstring) and spoken by
Python and Java; here one side's bytes are fed to the other through the shared Spark session's
gateway, not only through a whole Spark job, so a drift of either shows as a wrong merge here.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from streaming import wire


def encoded(lost: int, max_us: int, sum_us: int, hist: dict[int, int]) -> bytes:
    """One histogram as the reader encodes it."""
    buckets = sorted(hist)
    return bytes(
        wire.encode(
            [lost], [max_us], [sum_us], [0, len(buckets)], buckets, [hist[b] for b in buckets]
        )[0].as_py()
    )


def random_histogram(rng: np.random.Generator) -> tuple[int, int, int, dict[int, int]]:
    """Lost, max, sum and counts of a histogram with 0..40 buckets spread over the layout."""
    n = int(rng.integers(0, 40))
    buckets = rng.choice(np.arange(3000), n, replace=False).tolist()
    counts = rng.integers(1, 2**40, n).tolist()
    return (
        int(rng.integers(0, 1000)),
        int(rng.integers(0, 2**50)),
        int(rng.integers(0, 2**55)),
        dict(zip(buckets, counts, strict=True)),
    )


@pytest.fixture(scope="module")
def merge(spark: Any) -> Any:
    """The Java aggregator itself (the jar is on the session's class path)."""
    return spark._jvm.dev.nines.spark.HistogramMerge()


def test_java_format_is_the_wire_format(spark: Any, merge: Any) -> None:
    assert spark._jvm.dev.nines.spark.HistogramMerge.FORMAT == wire.FORMAT
    assert bytes(merge.zero()) == encoded(0, 0, 0, {})


@pytest.mark.parametrize("seed", range(8))
def test_java_merge_of_encoded_histograms_is_the_sum(merge: Any, seed: int) -> None:
    rng = np.random.default_rng(seed)
    parts = [random_histogram(rng) for _ in range(3)]
    acc = merge.zero()
    for lost, max_us, sum_us, hist in parts:
        acc = merge.reduce(acc, encoded(lost, max_us, sum_us, hist))
    both = merge.merge(merge.zero(), acc)
    lost, max_us, sum_us, buckets, counts = wire.decode(bytes(both))
    expected: dict[int, int] = {}
    for *_, hist in parts:
        for b, c in hist.items():
            expected[b] = expected.get(b, 0) + c
    assert lost == sum(p[0] for p in parts)
    assert max_us == max(p[1] for p in parts)
    assert sum_us == sum(p[2] for p in parts)
    assert dict(zip(buckets.tolist(), counts.tolist(), strict=True)) == expected
    assert buckets.tolist() == sorted(expected)  # ascending, no bucket twice


def test_java_refuses_another_format(merge: Any) -> None:
    other = bytearray(encoded(1, 2, 3, {5: 6}))
    other[0] = wire.FORMAT + 1
    with pytest.raises(Exception, match="expected format"):
        merge.merge(encoded(1, 2, 3, {5: 6}), bytes(other))
