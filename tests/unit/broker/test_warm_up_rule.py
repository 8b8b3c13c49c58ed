"""The rule that ends ``nines broker --engine kafka``'s warm-up (testbroker.kraft.warm_verdict),
run over generated per-second ack p99 series as the warm-up produces them."""

from __future__ import annotations

import math
import random

from testbroker.kraft import WARM_P99_S, WARM_UP_MAX_S, WARM_UP_S, warm_verdict

INF = math.inf


def run(p99s: list[float]) -> tuple[int, str]:
    """Feed one p99 a second, as the warm-up does; (seconds it ran, verdict)."""
    before = INF
    for second, p99 in enumerate(p99s, start=1):
        verdict = warm_verdict(float(second), p99, before)
        if verdict is not None:
            return second, verdict
        before = p99
    raise AssertionError("the warm-up never ended")


def test_never_before_the_minimum_whatever_the_acks() -> None:
    for second in range(int(WARM_UP_S)):
        for p99 in (0.001, WARM_P99_S / 2, 0.2, INF):
            assert warm_verdict(float(second), p99, p99) is None


def test_fast_acks_end_it_at_the_minimum() -> None:
    assert run([0.001] * 100) == (int(WARM_UP_S), "warm")


def test_a_jit_that_keeps_improving_runs_until_it_is_under_the_target() -> None:
    rng = random.Random(41)
    for _ in range(200):
        # falling by 5-30 % a second from 0.5-3 s: improving every second until under 50 ms
        p99, series = rng.uniform(0.5, 3.0), []
        while p99 >= WARM_P99_S:
            series.append(p99)
            p99 *= rng.uniform(0.7, 0.95)
        series += [p99] * 100
        seconds, verdict = run(series)
        first_fast = next(i for i, v in enumerate(series, 1) if v < WARM_P99_S)
        if first_fast <= WARM_UP_MAX_S:
            assert (seconds, verdict) == (max(first_fast, int(WARM_UP_S)), "warm"), series
        else:
            assert (seconds, verdict) == (int(WARM_UP_MAX_S), "not warm, ready anyway")


def test_a_plateau_above_the_target_ends_it_at_the_first_second_no_better() -> None:
    rng = random.Random(42)
    for _ in range(200):
        n = rng.randint(1, 20)  # seconds of improvement, then no better (flat or worse) for good
        series = [1.0 - 0.01 * i for i in range(n)] + [1.0 - 0.01 * (n - 1) + rng.uniform(0, 0.1)]
        series += [series[-1]] * 100
        seconds, verdict = run(series)
        assert (seconds, verdict) == (max(n + 1, int(WARM_UP_S)), "warm (acks stopped improving)")


def test_seconds_without_acks_never_count_as_a_plateau() -> None:
    assert run([INF] * 100) == (int(WARM_UP_MAX_S), "not warm, ready anyway")
    # acks come back after a silent spell: judged from then on
    assert run([INF] * 10 + [0.3, 0.2, 0.2] + [0.01] * 100) == (13, "warm (acks stopped improving)")
