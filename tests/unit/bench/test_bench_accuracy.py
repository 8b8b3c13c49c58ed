"""The accuracy study shows what it claims: merged HDR is right, the naive ways are not."""

from __future__ import annotations

import math

import numpy as np
import pytest

from bench.accuracy import relative_error
from bench.datasets import STALL_S, ctrl_z, hiccups
from bench.methods import (
    STUDY_QUANTILES,
    averaged_percentiles,
    exact_quantiles,
    nines_merged,
    prometheus_classic,
    xinfra,
    xinfra_percentile,
)


def _worst(reading: dict[float, float], exact: dict[float, float]) -> float:
    return max(abs(relative_error(reading[q], exact[q])) for q in STUDY_QUANTILES)


@pytest.fixture(scope="module")
def hiccup_data() -> tuple[list[np.ndarray], dict[float, float]]:
    ds = hiccups(240_000, 60, 10.0, seed=7)
    return ds.windows, exact_quantiles(ds.all_us())


def test_nines_within_hdr_precision_on_hiccups(hiccup_data) -> None:
    windows, exact = hiccup_data
    assert _worst(nines_merged(windows), exact) <= 1e-3  # 3 significant digits
    assert nines_merged(windows)[1.0] == exact[1.0]  # the max is exact


def test_averaging_and_classic_histogram_err_far_more_on_hiccups(hiccup_data) -> None:
    windows, exact = hiccup_data
    nines = max(_worst(nines_merged(windows), exact), 1e-4)
    assert _worst(averaged_percentiles(windows), exact) > 20 * nines
    assert _worst(prometheus_classic(windows), exact) > 20 * nines


def test_xinfra_clamps_at_its_max() -> None:
    values = np.array([1_000] * 98 + [7_000_000, 9_000_000], dtype=np.int64)
    assert xinfra_percentile(values, 0.5) == pytest.approx(0.001)
    assert xinfra_percentile(values, 0.99) == pytest.approx(4.999)  # 9 s reads as the last bin
    assert xinfra([values])[1.0] == pytest.approx(4.999)
    assert math.isinf(xinfra_percentile(values, 1.0))  # Kafka's readout never exceeds 100 %


def test_ctrl_z_trace_has_the_open_loop_shape() -> None:
    ds = ctrl_z(120_000, 60, 10.0, seed=1)
    v = ds.all_us()
    rate = v.size / 600.0
    stalled = v > 10_000
    assert stalled.sum() == pytest.approx(STALL_S * rate, abs=2)
    assert v.max() == pytest.approx(STALL_S * 1e6 + 1_000, abs=200)
    # waits are spread evenly from the stall down to the floor
    assert np.median(v[stalled]) == pytest.approx(STALL_S * 1e6 / 2, rel=0.01)


def test_open_loop_expectation_matches_the_arithmetic() -> None:
    from bench.coordinated_omission import CO_QUANTILES, expectation, expected_samples_us

    # 20 s at 100/s = 2,000 messages at ~1 ms; a 5 s stall holds 500 of them (25 %).
    measured = [1000] * 2000
    exp = expected_samples_us(measured, 100.0, 5.0)
    assert exp.size == 2000
    assert np.sort(exp)[-1] == pytest.approx(5_001_000)
    assert np.count_nonzero(exp > 10_000) == 500  # the last one waits 10 ms + floor
    q = expectation(measured, 100.0, 5.0)["quantiles_s"]
    assert set(q) == {str(x) for x in CO_QUANTILES}
    assert q["0.5"] == pytest.approx(0.001)
    assert q["0.999"] == pytest.approx(5.001 - 0.02)  # rank 1998: 2 above, third-longest wait
    assert q["1.0"] == pytest.approx(5.001)


def test_expected_interval_correction_backfills_like_hdrhistogram_java() -> None:
    """Java's loop: missing = v − i, v − 2i, … while missing ≥ i (hdrh-py records one more)."""
    from bench.coordinated_omission import corrected_for_expected_interval

    samples = [1_000, 1_200, 53_000, 900]
    mine = corrected_for_expected_interval(samples, 10_000)
    assert sorted(mine) == [900, 1_000, 1_200, 13_000, 23_000, 33_000, 43_000, 53_000]
