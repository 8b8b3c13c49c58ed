"""The held peak: a window's max reaches a scraper even when later windows close before it scrapes.

The latest-window gauge shows only the last window of a burst (a backlog after an outage closes
the stall's window and the ones after it in one micro-batch); ``nines_latency_peak_seconds``
holds every window's max for ``peak_hold``.
"""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from core.hdr import HdrLayout, SparseHistogram
from core.windows import ALL_PARTITIONS, SeriesKey, WindowHistogram, with_rollups
from monitor.exporter import ExporterConfig, LatencyExporter
from testkit.exporter import peak_sizes, text_body

LAYOUT = HdrLayout()
S = 1_000_000


def window(end_s: int, max_s: float, partition: str = ALL_PARTITIONS, broker: str = ""):  # type: ignore[no-untyped-def]
    values = [1_000, int(max_s * S)]
    return WindowHistogram(
        "10s",
        (end_s - 10) * S,
        end_s * S,
        SeriesKey("c", "t", partition, "e2e", broker),
        SparseHistogram.from_values(LAYOUT, values),
        0,
    )


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def gauges(exp: LatencyExporter, name: str) -> dict[str, float]:
    """``partition`` (or ``broker``) → value of one gauge family."""
    out = {}
    for fam in text_string_to_metric_families(text_body(exp).decode()):
        for s in fam.samples:
            if s.name == name:
                out[s.labels.get("broker") or s.labels["partition"]] = s.value
    return out


def peak_and_max(exp: LatencyExporter) -> tuple[float, float]:
    peak = gauges(exp, "nines_latency_peak_seconds")[ALL_PARTITIONS]
    return peak, gauges(exp, "nines_latency_max_seconds")[ALL_PARTITIONS]


def close_to(value: float, expected_s: float) -> bool:
    """Equal within the HDR bucket of ``expected_s`` (3 significant digits)."""
    return abs(value - expected_s) <= expected_s * 1e-3


def test_a_burst_of_windows_keeps_the_stalls_max_on_the_peak() -> None:
    exp = LatencyExporter(clock=Clock())
    # a backlog: the stall's window (6 s) and two healthy ones close in one micro-batch
    exp.update([window(10, 0.01), window(20, 6.0), window(30, 0.02), window(40, 0.01)])
    peak, latest = peak_and_max(exp)
    assert close_to(latest, 0.01)  # the latest window's gauge has lost the stall
    assert close_to(peak, 6.0)


def test_the_peak_is_held_for_peak_hold_then_falls_to_the_next_held_max() -> None:
    clock = Clock()
    exp = LatencyExporter(ExporterConfig(peak_hold=120), clock=clock)
    exp.update([window(10, 6.0)])
    clock.now += 60
    exp.update([window(20, 3.0)])
    clock.now += 59  # 119 s after the 6 s window arrived
    exp.update([window(30, 0.01)])
    assert close_to(peak_and_max(exp)[0], 6.0)
    clock.now += 1  # 120 s: let go at this batch
    exp.update([window(40, 0.01)])
    peak, latest = peak_and_max(exp)
    assert close_to(peak, 3.0) and close_to(latest, 0.01)
    clock.now += 60
    exp.update([])  # a batch without windows lets go too
    assert close_to(peak_and_max(exp)[0], 0.01)  # never below the latest window's max


def test_an_older_window_arriving_after_the_latest_raises_the_peak_only() -> None:
    exp = LatencyExporter(clock=Clock())
    exp.update([window(40, 0.5), window(30, 4.0)])  # the newest first, as a batch may order
    peak, latest = peak_and_max(exp)
    assert close_to(latest, 0.5) and close_to(peak, 4.0)


def test_peaks_for_topic_broker_and_hiccup_series_not_per_partition() -> None:
    exp = LatencyExporter(clock=Clock())
    cells = [window(10, 2.0, partition="0", broker="1"), window(10, 0.1, partition="1", broker="2")]
    hiccup = WindowHistogram(
        "10s", 0, 10 * S, SeriesKey("c", "probe", ALL_PARTITIONS, "hiccup"),
        SparseHistogram.from_values(LAYOUT, [1_500_000]), 0,
    )  # fmt: skip
    exp.update([*with_rollups(cells), hiccup])
    topic = gauges(exp, "nines_latency_peak_seconds")
    assert set(topic) == {ALL_PARTITIONS}  # the topic's and the hiccups' (probe topic): no "0"
    assert len([1 for _ in topic]) == 1
    body = text_body(exp).decode()
    assert body.count("nines_latency_peak_seconds{") == 2  # e2e of the topic, hiccup of the probe
    assert 'nines_latency_peak_seconds{cluster="c",kind="hiccup",partition="all"' in body
    brokers = gauges(exp, "nines_broker_latency_peak_seconds")
    assert close_to(brokers["1"], 2.0) and close_to(brokers["2"], 0.1)
    assert not [
        line for line in body.splitlines() if "peak_seconds{" in line and 'partition="0"' in line
    ]


def test_held_maxima_stay_bounded_by_the_batches_within_the_hold() -> None:
    clock = Clock()
    exp = LatencyExporter(ExporterConfig(peak_hold=10), clock=clock)
    for i in range(2_000):  # strictly falling maxima: none dominates another, all are held
        exp.update([window(10 * (i + 1), 100.0 - i * 0.04)])
        clock.now += 1
    keys, most, due = peak_sizes(exp.collectors.latest.peaks)
    assert (keys, most) == (1, 10) and due <= 2  # one entry per batch within the 10 s
    assert close_to(peak_and_max(exp)[0], 100.0 - 1_990 * 0.04)  # the oldest within the hold
    for i in range(2_000):  # rising maxima: each lets go of all held before it
        exp.update([window(10 * (i + 2_001), 1.0 + i * 0.04)])
        clock.now += 1
    keys, most, due = peak_sizes(exp.collectors.latest.peaks)
    assert (keys, most) == (1, 10) and due <= 2  # one entry per batch within the 10 s


def test_a_series_that_leaves_takes_its_peak_along() -> None:
    exp = LatencyExporter(ExporterConfig(series_ttl_windows=2), clock=Clock())
    gone = WindowHistogram(
        "10s", 0, 10 * S, SeriesKey("c", "gone", ALL_PARTITIONS, "e2e"),
        SparseHistogram.from_values(LAYOUT, [5 * S]), 0,
    )  # fmt: skip
    exp.update([gone, window(10, 0.1)])
    exp.update([window(40, 0.1)])  # "gone" has no window for 3 windows: it leaves
    assert 'topic="gone"' not in text_body(exp).decode()
    assert exp.collectors.latest.peaks.peak(("10s", gone.series)) is None


def test_a_scraper_slower_than_the_hold_is_counted_and_warned_once(caplog) -> None:  # type: ignore[no-untyped-def]
    import urllib.request

    clock = Clock()
    exp = LatencyExporter(ExporterConfig(peak_hold=120), clock=clock)
    server = exp.serve(port=0)
    try:

        def scrape() -> str:
            url = f"http://127.0.0.1:{server.port}/metrics"
            with urllib.request.urlopen(url, timeout=10) as resp:
                return str(resp.read().decode())

        scrape()
        clock.now += 119  # within the hold: no gap
        scrape()
        exp.scraped("10.0.0.2")  # another scraper's first scrape is no gap either
        for _ in range(2):
            clock.now += 121
            body = scrape()
        assert exp.collectors.scrapes.gaps == 2
        assert "nines_scrape_gaps_total 2.0" in body  # counted before the body is rendered
        body = scrape()  # right after: no gap
        assert "nines_scrape_gaps_total 2.0" in body and "nines_peak_hold_seconds 120.0" in body
        warned = [r for r in caplog.records if "longer than peak_hold" in r.getMessage()]
        assert len(warned) == 1 and "127.0.0.1" in warned[0].getMessage()
    finally:
        server.close()


def test_scrapers_kept_are_bounded() -> None:
    from monitor.exporter.scrapes import MAX_SCRAPERS

    clock = Clock()
    exp = LatencyExporter(clock=clock)
    for i in range(10 * MAX_SCRAPERS):
        exp.scraped(f"10.0.{i // 256}.{i % 256}")
    assert len(exp.collectors.scrapes) == MAX_SCRAPERS
    clock.now += 1_000
    exp.scraped("10.0.0.0")  # forgotten long ago: a first scrape again, no gap
    assert exp.collectors.scrapes.gaps == 0


def sized_window(end_s: int, base_us: int, slow_us: int, n: int = 2_000):  # type: ignore[no-untyped-def]
    """A window of ``n`` samples whose slowest 1 % take ``slow_us``."""
    values = [base_us] * (n - n // 100) + [slow_us] * (n // 100)
    return WindowHistogram(
        "10s", (end_s - 10) * S, end_s * S, SeriesKey("c", "t", ALL_PARTITIONS, "e2e"),
        SparseHistogram.from_values(LAYOUT, values), 0,
    )  # fmt: skip


def test_a_burst_keeps_the_worst_windows_quantiles_each_from_its_own_histogram() -> None:
    exp = LatencyExporter(clock=Clock())
    exp.update([sized_window(10, 1_000, 900_000), sized_window(20, 1_000, 2_000)])
    body = text_body(exp).decode()
    by_quantile = {}
    latest = {}
    for fam in text_string_to_metric_families(body):
        for s in fam.samples:
            if s.name == "nines_latency_peak_quantile_seconds":
                by_quantile[s.labels["q"]] = s.value
            if s.name == "nines_latency_seconds":
                latest[s.labels["q"]] = s.value
    # 2,000 samples support p99.9 at most; the stall window's p99.9 is held, the latest's is not
    assert set(by_quantile) == set(latest) == {"0.5", "0.9", "0.99", "0.999"}
    assert close_to(by_quantile["0.999"], 0.9) and close_to(latest["0.999"], 0.002)
    assert close_to(by_quantile["0.5"], 0.001)  # a quantile each window shares stays as it was


def test_peak_hold_merges_one_arrival_and_lets_go_in_order() -> None:
    from monitor.exporter.hold import PeakHold, largest

    assert largest([(1, None, 3), (2, 5, None)]) == (2, 5, 3)
    hold = PeakHold(hold_s=10)
    hold.hold("k", (5, None), now=0)
    hold.hold("k", (3, 7), now=0)  # the same batch: merged, one entry
    hold.hold("k", (4, 1), now=6)
    assert hold.peak("k") == (5, 7) and peak_sizes(hold) == (1, 2, 1)
    assert hold.expire(9.9) == set()
    assert hold.expire(10) == {"k"} and hold.peak("k") == (4, 1)
    hold.drop("k")
    hold.hold("k", (1, 1), now=12)  # held anew: the old schedule (due 16) must not cut it short
    assert hold.expire(16) == set() and hold.peak("k") == (1, 1)
    assert hold.expire(22) == {"k"} and hold.peak("k") is None and peak_sizes(hold) == (0, 0, 0)
