"""The watermark lag gauge shows a watermark ahead of now as a negative lag, not as zero."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import pytest

from streaming.config import StreamConfig
from streaming.job import StreamJob


def lag_for(watermark_s: float, monkeypatch: pytest.MonkeyPatch) -> float:
    job = StreamJob(StreamConfig(bootstrap="unused:1"))
    iso = datetime.fromtimestamp(watermark_s, UTC).isoformat().replace("+00:00", "Z")
    job.query = SimpleNamespace(
        lastProgress={"durationMs": {"triggerExecution": 10}, "eventTime": {"watermark": iso}}
    )
    seen: list[Any] = []
    sink = SimpleNamespace(set_pipeline_health=lambda *a: seen.append(a))
    job._health(sink)  # type: ignore[arg-type]
    return float(seen[0][2])


def test_a_watermark_ahead_of_now_is_a_negative_lag(monkeypatch: pytest.MonkeyPatch) -> None:
    assert lag_for(time.time() + 3600, monkeypatch) == pytest.approx(-3600, abs=5)


def test_a_watermark_behind_now_is_a_positive_lag(monkeypatch: pytest.MonkeyPatch) -> None:
    assert lag_for(time.time() - 120, monkeypatch) == pytest.approx(120, abs=5)


def test_max_clock_skew_is_a_duration_and_must_be_positive() -> None:
    assert StreamConfig(bootstrap="x:1").max_clock_skew == 300.0
    assert StreamConfig(bootstrap="x:1", max_clock_skew="90s").max_clock_skew == 90.0
    with pytest.raises(ValueError, match="max_clock_skew"):
        StreamConfig(bootstrap="x:1", max_clock_skew="0s")
