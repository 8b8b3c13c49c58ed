"""The exporter: the stream job's ``WindowSink``, its collectors, and the renderer that reads them.

The job hands over closed windows and counters. A closed window is final: its numbers go to the
collectors, each updating only its own state (client_python's seam): the series cap
(``series``), the latest window of every series with the held peaks (``latest``), cumulative
histograms (``cumulative``), counters and health (``counters``), scrape gaps (``scrapes``). The
renderer (``render``) owns the locks, the versions and the caches, and encodes a scrape's body
from snapshots of them, each resolution whose windows changed once per format; /metrics is served
by ``runtime.webserver`` (``serve``: one call).

Peaks are held for the series alerts and headline panels read (``partition="all"``: topics,
brokers, the probes' hiccups), not per probe partition: at the series cap that would add a
tenth to a scrape already near its budget (docs/benchmarks.md, scrape cost). Micrometer's max
gauge holds its maximum over a rolling 2 minutes for the same reason (``latest`` says why).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from core.hdr import REPORTED_QUANTILES, quantiles_of_many
from core.sla import BUCKET_BOUNDARIES_S
from core.windows import ALL_PARTITIONS, DEFAULT_WINDOWS, WindowHistogram, WindowSpec
from monitor.exporter.config import ExporterConfig
from monitor.exporter.counters import Counters
from monitor.exporter.cumulative import CumulativeHistograms
from monitor.exporter.latest import LatestWindows
from monitor.exporter.render import PROTOBUF, TEXT, Collectors, Renderer
from monitor.exporter.scrapes import ScrapeGaps
from monitor.exporter.series import SeriesBook
from runtime.webconfig import WebConfig
from runtime.webserver import MetricsServer
from streaming.counters import StreamCounters

#: ``le`` boundaries (seconds) of ``nines_latency_classic_seconds`` (the SLA's layout).
DEFAULT_LE: tuple[float, ...] = BUCKET_BOUNDARIES_S
#: The settings of an exporter built without any (tests, benches): the model's defaults.
DEFAULT_CONFIG = ExporterConfig()


class LatencyExporter:
    """Exports the latest closed window of every series and resolution, plus cumulative counters."""

    def __init__(
        self,
        config: ExporterConfig = DEFAULT_CONFIG,
        windows: WindowSpec = DEFAULT_WINDOWS,
        quantiles: Sequence[float] = REPORTED_QUANTILES,
        le_seconds: Sequence[float] = DEFAULT_LE,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        #: the settings (``stream:`` section): read where they act, never copied
        self.config = config
        self.quantiles = tuple(quantiles)
        #: the stream job's resolutions, parsed once (``StreamConfig.spec``): the finest one's
        #: windows feed the cumulative histograms and counters
        self.windows = windows
        self._clock = clock
        self.collectors = Collectors(
            SeriesBook(config.max_series),
            LatestWindows(len(self.quantiles), hold_s=config.peak_hold),
            CumulativeHistograms(le_seconds, config.native_schema, config.native_max_buckets),
            Counters(),
            ScrapeGaps(gap_s=config.scrape_gap_s),
        )
        self.renderer = Renderer(self.collectors, config, windows.finest, self.quantiles, clock)

    def update(
        self, windows: Sequence[WindowHistogram], counters: StreamCounters | None = None
    ) -> None:
        """Take a batch of closed windows (each final) and the batch's counters.

        Only the numbers are kept here: encoding them is a scrape's, once per resolution whose
        windows changed, so a window superseded before the next scrape is never encoded; but a
        coarser resolution's change kicks the pre-render worker, if any (``render``).
        """
        c = self.collectors
        with self.renderer.locks.state():
            now = self._clock()
            #: keys whose held peak may have changed: a held max let go, or a window held
            stale = c.latest.expire(now)
            admitted = [w for w in windows if c.series.admit(w)]
            reads = quantiles_of_many([w.hist for w in admitted], self.quantiles)
            c.latest.add(admitted, reads, now, stale)
            finest, per_partition = self.windows.finest, self.config.partition_histograms
            totals, overflow = reads.totals.tolist(), reads.overflow.tolist()
            for i, w in enumerate(admitted):
                series = w.series
                if w.resolution != finest or series.broker:
                    continue  # broker rollups hold the topic's samples again: never counted
                merged = series.partition == ALL_PARTITIONS
                if merged != per_partition:
                    c.cumulative.add(w)
                if not merged and counters is None:
                    c.counters.derive(w, totals[i], overflow[i])
            if counters is not None:
                c.counters.add(counters)
            for (res, series), kept in c.latest.evict_stale(self.config.series_ttl_windows):
                gone = c.series.evicted_window(res, series, kept)
                if gone and not series.broker:  # counters are per partition, never per broker
                    c.counters.forget((series.cluster, series.topic, series.partition))
                if res == finest:
                    c.cumulative.drop(series)
            c.counters.bound_systems(c.series.clusters())
            c.latest.refresh_peaks(stale)
        self.renderer.updated()

    def scraped(self, scraper: str) -> None:
        """Note a scrape by ``scraper``; one later than ``scrape_gap_s`` after its previous one
        is a gap (counted, logged once per scraper): a held peak may have expired unseen in it."""
        with self.renderer.locks.state():
            self.collectors.scrapes.scraped(scraper, self._clock())

    def set_pipeline_health(
        self,
        batch_duration_s: float,
        input_rows_per_s: float,
        watermark_lag_s: float,
        state_rows: int,
        last_batch_ts: float | None = None,
    ) -> None:
        """Record one completed micro-batch's health figures."""
        with self.renderer.locks.state():
            self.collectors.counters.set_health(
                batch_duration_s, input_rows_per_s, watermark_lag_s, state_rows, last_batch_ts
            )

    def latest_windows(self, brokers: bool = False) -> dict[str, list[WindowHistogram]]:
        """Resolution → the latest closed window of each series (for live views).

        Per-broker rollups only with ``brokers``: they hold the same samples as the topic's.
        """
        with self.renderer.locks.state():
            return self.collectors.latest.windows(brokers)

    def exposition_parts(self, fmt: str = TEXT) -> tuple[bytes, ...]:
        """The body of ``fmt`` (``TEXT`` or ``PROTOBUF``) in parts, the same tuple until
        something changes (``Renderer.parts``)."""
        return self.renderer.parts(fmt)

    def serve(
        self, host: str | None = None, port: int | None = None, web: WebConfig | None = None
    ) -> MetricsServer:
        """Serve /metrics from this exporter (``metrics_host``/``metrics_port`` by default; port
        0 picks a free port; ``web``: TLS/auth), its coarse chunks pre-rendered."""
        from core import promproto

        server = MetricsServer(
            lambda: self.renderer.parts(TEXT),
            self.config.metrics_host if host is None else host,
            self.config.metrics_port if port is None else port,
            web,
            on_scrape=self.scraped,
            protobuf=lambda: self.renderer.parts(PROTOBUF),
        )
        self.renderer.prerender(
            {
                TEXT: server.compressor(server.content_type),
                PROTOBUF: server.compressor(promproto.CONTENT_TYPE),
            }
        )
        return server
