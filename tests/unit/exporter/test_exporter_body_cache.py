"""A scrape never holds up a micro-batch for a render: an unchanged body is one tuple of parts
(rendered and compressed once however many scrapers ask), and a body is joined outside the lock
that ``update`` takes, so a micro-batch goes on while a scrape renders."""

from __future__ import annotations

import threading
import time

import pytest

from core.hdr import HdrLayout, SparseHistogram
from core.windows import SeriesKey, WindowHistogram
from monitor.exporter import LatencyExporter, text
from testkit.exporter import text_body

LAYOUT = HdrLayout()


def window(max_us: int, start_s: int = 0, partition: str = "0") -> WindowHistogram:
    return WindowHistogram(
        "10s",
        start_s * 1_000_000,
        (start_s + 10) * 1_000_000,
        SeriesKey("c", "t", partition, "e2e"),
        SparseHistogram.from_values(LAYOUT, [1_000, max_us]),
    )


def max_line(body: bytes, partition: str = "0") -> str:
    return next(
        line
        for line in body.decode().splitlines()
        if line.startswith("nines_latency_max_seconds{") and f'partition="{partition}"' in line
    )


def test_an_unchanged_body_is_the_same_object_and_every_change_renders_anew() -> None:
    exp = LatencyExporter()
    exp.update([window(5_000)])
    first = exp.exposition_parts()  # what the server sends
    assert exp.exposition_parts() is first
    exp.set_pipeline_health(0.5, 100.0, 1.0, 10)
    second = exp.exposition_parts()
    assert second != first
    exp.update([window(7_000, start_s=10)])
    third = exp.exposition_parts()
    assert third is not second and "0.007" in max_line(b"".join(third))
    exp.scraped("10.0.0.1")  # a scrape that is no gap changes nothing a scraper sees
    assert exp.exposition_parts() is third


def test_a_micro_batch_goes_on_while_a_scrape_joins_its_body(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    exp = LatencyExporter()
    exp.update([window(5_000, partition=str(p)) for p in range(50)])
    joining, release = threading.Event(), threading.Event()
    real = text.body

    def slow_body(*args: object) -> bytes:
        joining.set()
        assert release.wait(10)
        return real(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(text, "body", slow_body)
    got: list[bytes] = []
    scrape = threading.Thread(target=lambda: got.append(text_body(exp)))
    scrape.start()
    assert joining.wait(5)
    start = time.monotonic()
    exp.update([window(9_000, start_s=10, partition=str(p)) for p in range(50)])  # the batch
    exp.set_pipeline_health(0.5, 100.0, 1.0, 10)
    took = time.monotonic() - start
    release.set()
    scrape.join(10)
    assert took < 1.0, f"the micro-batch waited {took:.2f} s for a render"
    assert "0.005" in max_line(got[0])  # the scrape's body: the state it copied
    monkeypatch.setattr(text, "body", real)
    fresh = text_body(exp)  # the windows that changed meanwhile are joined again, not stale
    assert all("0.009" in max_line(fresh, str(p)) for p in range(50))
