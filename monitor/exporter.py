"""Prometheus exporter of closed windows: high nines (sample-size gated), exact max, histograms.

The custom-collector pattern of prometheus/client_python: the streaming job hands over closed
windows and counters; ``collect()`` builds fresh metric families from that state on each scrape.
Quantiles are read from (merged) histograms only; nothing here averages a quantile.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from monitor.core.echo import BAD_REASONS
from monitor.core.hdr import REPORTED_QUANTILES, min_samples_for
from monitor.core.units import parse_duration_s
from monitor.core.windows import ALL_PARTITIONS, SeriesKey, WindowHistogram

#: ``le`` boundaries (seconds) of ``nines_latency_histogram_seconds``: 1-2.5-5 steps, 100 µs to 1 h.
DEFAULT_LE: tuple[float, ...] = (
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
    1.0, 2.5, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0, 1000.0, 2500.0, 3600.0,
)  # fmt: skip

#: Column labels of the demo's quantile table and the quantile behind each.
TABLE_QUANTILES: tuple[tuple[str, float], ...] = (
    ("p50", 0.5),
    ("p90", 0.9),
    ("p99", 0.99),
    ("p99.9", 0.999),
    ("p99.99", 0.9999),
    ("p99.999", 0.99999),
    ("p99.9999", 0.999999),
)

_SERIES_LABELS = ["cluster", "topic", "partition", "kind"]
_TOPIC_LABELS = ["cluster", "topic", "partition"]


class Counters(Protocol):
    """What the exporter reads of ``streaming.counters.StreamCounters``."""

    @property
    def echoes(self) -> Mapping[tuple[str, str, str], int]: ...
    @property
    def lost(self) -> Mapping[tuple[str, str, str], int]: ...
    @property
    def late(self) -> Mapping[tuple[str, str, str], int]: ...
    @property
    def overflow(self) -> Mapping[SeriesKey, int]: ...
    @property
    def bad(self) -> Mapping[str, int]: ...
    @property
    def data_loss(self) -> Mapping[tuple[str, str], int]: ...


@dataclass
class _Cumulative:
    """Counters and histogram buckets accumulated since the exporter started."""

    echoes: dict[tuple[str, str, str], int] = field(default_factory=dict)
    lost: dict[tuple[str, str, str], int] = field(default_factory=dict)
    late: dict[tuple[str, str, str], int] = field(default_factory=dict)
    overflow: dict[SeriesKey, int] = field(default_factory=dict)
    bad: dict[str, int] = field(default_factory=lambda: dict.fromkeys(BAD_REASONS, 0))
    data_loss: dict[tuple[str, str], int] = field(default_factory=dict)
    buckets: dict[SeriesKey, list[int]] = field(default_factory=dict)
    count: dict[SeriesKey, int] = field(default_factory=dict)
    sum_s: dict[SeriesKey, float] = field(default_factory=dict)


def _add(into: dict[Any, int], key: Any, value: int) -> None:
    into[key] = into.get(key, 0) + int(value)


def _label(key: tuple[str, str, str]) -> list[str]:
    return [str(k) for k in key]


class LatencyExporter(Collector):
    """Exports the latest closed window of every series and resolution, plus cumulative counters."""

    def __init__(
        self,
        registry: CollectorRegistry | None = None,
        quantiles: Sequence[float] = REPORTED_QUANTILES,
        le_seconds: Sequence[float] = DEFAULT_LE,
        finest_resolution: str | None = None,
    ) -> None:
        self.quantiles = tuple(quantiles)
        self.le_seconds = tuple(le_seconds)
        self.finest_resolution = finest_resolution
        self._lock = threading.Lock()
        self._latest: dict[tuple[str, SeriesKey], WindowHistogram] = {}
        self._window_end: dict[str, int] = {}
        self._cum = _Cumulative()
        self._health: dict[str, float] = {}
        self._batches = 0
        if registry is not None:
            registry.register(self)

    def update(self, windows: Sequence[WindowHistogram], counters: Counters | None = None) -> None:
        """Take a batch of closed windows (each final) and the batch's counters."""
        with self._lock:
            if self.finest_resolution is None and windows:
                self.finest_resolution = min((w.resolution for w in windows), key=parse_duration_s)
            for w in windows:
                key = (w.resolution, w.series)
                current = self._latest.get(key)
                if current is None or w.window_end_us >= current.window_end_us:
                    self._latest[key] = w
                self._window_end[w.resolution] = max(
                    self._window_end.get(w.resolution, 0), w.window_end_us
                )
                if w.resolution == self.finest_resolution and w.series.partition != ALL_PARTITIONS:
                    self._accumulate(w, derive_counts=counters is None)
            if counters is not None:
                for src, dst in (
                    (counters.echoes, self._cum.echoes),
                    (counters.lost, self._cum.lost),
                    (counters.late, self._cum.late),
                    (counters.overflow, self._cum.overflow),
                    (counters.bad, self._cum.bad),
                    (counters.data_loss, self._cum.data_loss),
                ):
                    for k, v in src.items():
                        _add(dst, k, v)

    def _accumulate(self, w: WindowHistogram, derive_counts: bool) -> None:
        s = w.series
        buckets = self._cum.buckets.setdefault(s, [0] * len(self.le_seconds))
        for i, le in enumerate(self.le_seconds):
            buckets[i] += w.hist.count_at_or_below(int(le * 1e6))
        _add(self._cum.count, s, w.hist.total)
        self._cum.sum_s[s] = self._cum.sum_s.get(s, 0.0) + w.hist.sum_us / 1e6
        if derive_counts and s.kind == "e2e":
            topic = (s.cluster, s.topic, s.partition)
            _add(self._cum.echoes, topic, w.hist.total)
            _add(self._cum.lost, topic, w.lost)
        if derive_counts and w.hist.overflow:
            _add(self._cum.overflow, s, w.hist.overflow)

    def set_pipeline_health(
        self,
        batch_duration_s: float,
        input_rows_per_s: float,
        watermark_lag_s: float,
        state_rows: int,
        last_batch_ts: float | None = None,
    ) -> None:
        """Record one completed micro-batch's health figures."""
        with self._lock:
            self._batches += 1
            self._health = {
                "batch_duration_seconds": batch_duration_s,
                "input_rows_per_second": input_rows_per_s,
                "watermark_lag_seconds": watermark_lag_s,
                "state_rows": float(state_rows),
                "last_batch_timestamp_seconds": last_batch_ts or time.time(),
            }

    def latest_windows(self) -> dict[str, list[WindowHistogram]]:
        """Resolution → the latest closed window of each series (for live views)."""
        with self._lock:
            out: dict[str, list[WindowHistogram]] = {}
            for (res, _), w in self._latest.items():
                out.setdefault(res, []).append(w)
            return out

    def collect(self) -> Iterator[Any]:
        """Fresh metric families from the current state."""
        with self._lock:
            yield from self._latency_families()
            yield from self._counter_families()
            yield from self._health_families()

    def _latency_families(self) -> Iterable[Any]:
        labels = [*_SERIES_LABELS, "window"]
        q = GaugeMetricFamily(
            "nines_latency_seconds",
            "Quantile of the latest closed window's HDR histogram (only with >= 1/(1-q) samples).",
            labels=[*labels, "quantile"],
        )
        mx = GaugeMetricFamily(
            "nines_latency_max_seconds", "Exact max of the latest closed window.", labels=labels
        )
        n = GaugeMetricFamily(
            "nines_latency_window_samples", "Samples in the latest closed window.", labels=labels
        )
        lost = GaugeMetricFamily(
            "nines_latency_window_lost", "Lost messages in the latest closed window.", labels=labels
        )
        for (res, s), w in sorted(self._latest.items(), key=lambda kv: (kv[0][0], _key(kv[0][1]))):
            lv = [s.cluster, s.topic, s.partition, s.kind, res]
            total = w.hist.total
            for quantile in self.quantiles:
                if total >= min_samples_for(quantile):
                    q.add_metric(
                        [*lv, floatToGoString(quantile)], w.hist.value_at_quantile(quantile) / 1e6
                    )
            mx.add_metric(lv, w.hist.max_us / 1e6)
            n.add_metric(lv, total)
            if s.kind == "e2e":
                lost.add_metric(lv, w.lost)
        end = GaugeMetricFamily(
            "nines_latency_window_end_timestamp_seconds",
            "End of the latest closed window of each resolution.",
            labels=["window"],
        )
        for res, end_us in sorted(self._window_end.items()):
            end.add_metric([res], end_us / 1e6)
        hist = HistogramMetricFamily(
            "nines_latency_histogram_seconds",
            "Latency of every closed window of the finest resolution, cumulative since start.",
            labels=_SERIES_LABELS,
        )
        for s in sorted(self._cum.buckets, key=_key):
            counts = self._cum.buckets[s]
            total = self._cum.count[s]
            buckets = [
                (floatToGoString(le), c) for le, c in zip(self.le_seconds, counts, strict=True)
            ]
            buckets.append(("+Inf", total))
            hist.add_metric([s.cluster, s.topic, s.partition, s.kind], buckets, self._cum.sum_s[s])
        return (q, mx, n, lost, end, hist)

    def _counter_families(self) -> Iterable[Any]:
        def topic_counter(name: str, doc: str, values: Mapping[tuple[str, str, str], int]) -> Any:
            fam = CounterMetricFamily(name, doc, labels=_TOPIC_LABELS)
            for k in sorted(values):
                fam.add_metric(_label(k), values[k])
            return fam

        cum = self._cum
        yield topic_counter("nines_echoes", "Echoes counted in closed windows.", cum.echoes)
        yield topic_counter("nines_lost", "Echoes of lost probe messages.", cum.lost)
        yield topic_counter("nines_late_echoes", "Echoes behind the watermark.", cum.late)
        bad = CounterMetricFamily(
            "nines_bad_echoes", "Malformed echo records skipped.", labels=["reason"]
        )
        for reason in sorted(cum.bad):
            bad.add_metric([reason], cum.bad[reason])
        yield bad
        over = CounterMetricFamily(
            "nines_latency_overflow",
            "Samples above the histogram's highest trackable value.",
            labels=_SERIES_LABELS,
        )
        for s in sorted(cum.overflow, key=_key):
            over.add_metric([s.cluster, s.topic, s.partition, s.kind], cum.overflow[s])
        yield over
        gone = CounterMetricFamily(
            "nines_data_loss_offsets",
            "Echo topic offsets that vanished before the job read them.",
            labels=["topic", "partition"],
        )
        for k in sorted(cum.data_loss):
            gone.add_metric([str(k[0]), str(k[1])], cum.data_loss[k])
        yield gone

    def _health_families(self) -> Iterable[Any]:
        yield CounterMetricFamily(
            "nines_stream_batches", "Micro-batches completed.", value=self._batches
        )
        docs = {
            "batch_duration_seconds": "Duration of the last micro-batch.",
            "input_rows_per_second": "Input rate of the last micro-batch.",
            "watermark_lag_seconds": "Now minus the event-time watermark.",
            "state_rows": "Rows in Spark's aggregation state.",
            "last_batch_timestamp_seconds": "When the last micro-batch finished.",
        }
        for name, doc in docs.items():
            if name in self._health:
                yield GaugeMetricFamily(f"nines_stream_{name}", doc, value=self._health[name])

    def serve(self, host: str = "127.0.0.1", port: int = 9464) -> MetricsServer:
        """Serve /metrics for a registry holding this exporter; port 0 picks a free port."""
        registry = CollectorRegistry(auto_describe=False)
        registry.register(self)
        return MetricsServer(registry, host, port)


def _key(s: SeriesKey) -> tuple[str, str, str, str]:
    return (s.cluster, s.topic, s.partition, s.kind)


class MetricsServer:
    """A running /metrics HTTP server; ``close()`` stops it."""

    def __init__(self, registry: CollectorRegistry, host: str, port: int) -> None:
        from prometheus_client import start_http_server

        self._server, self._thread = start_http_server(port, addr=host, registry=registry)
        self.host = host
        self.port = int(self._server.server_address[1])

    def close(self) -> None:
        """Stop serving."""
        self._server.shutdown()
        self._server.server_close()


def quantile_table(windows: Iterable[WindowHistogram]) -> list[dict[str, Any]]:
    """Per series: samples, gated quantiles (seconds, None when too few samples), max, lost."""
    rows = []
    for w in sorted(windows, key=lambda w: (_key(w.series), w.window_start_us)):
        total = w.hist.total
        row: dict[str, Any] = {
            "cluster": w.series.cluster,
            "topic": w.series.topic,
            "partition": w.series.partition,
            "kind": w.series.kind,
            "window": w.resolution,
            "samples": total,
            "max": w.hist.max_us / 1e6,
            "lost": w.lost,
        }
        for label, q in TABLE_QUANTILES:
            row[label] = w.hist.value_at_quantile(q) / 1e6 if total >= min_samples_for(q) else None
        rows.append(row)
    return rows
