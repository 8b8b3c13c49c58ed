"""The exporter's state: the latest closed window of every series, cumulative counters and buckets.

The stream job hands over closed windows and counters (it is the job's ``WindowSink``). A closed
window is final: its numbers are kept in its resolution's ``table`` (the quantiles of a whole
batch read at once), and a scrape encodes the resolutions whose windows changed since the last
one, in each format once (``exposition`` says why), beside the families built from the
cumulative state. A window of the finest resolution superseded before the next scrape is never
encoded; the coarser ones' windows close rarely and all at once (the 1 h ones: the whole body
changes), so a background worker encodes and deflates their chunks when they arrive
(``prerender``), and the hourly scrape costs what the others do.

A gauge of the latest closed window misses a window that closes between two scrapes and is
followed by another before the next (a backlog after an outage closes many at once: the stall's
own window among them). So each series also holds a **peak** (``hold``): the largest max, and
the largest of each quantile, of its windows that arrived in the last ``peak_hold``, never
below the latest's. Every window's values are then exported for ``peak_hold``, longer than
any scrape interval (Micrometer's max gauge holds its maximum over a rolling 2 minutes for the
same reason). Peaks are held for the series alerts and
headline panels read (``partition="all"``: topics, brokers, the probes' hiccups), not per probe
partition: at 10,000 partitions that would add a tenth to the scrape, near its 5 MB budget.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from prometheus_client.utils import floatToGoString

from core.echo import BAD_REASONS
from core.gzip_parts import PartsGzip
from core.hdr import REPORTED_QUANTILES, ManyReads, SparseHistogram, quantiles_of_many
from core.sla import BUCKET_BOUNDARIES_S
from core.windows import (
    ALL_PARTITIONS,
    DEFAULT_WINDOWS,
    KINDS,
    SeriesKey,
    WindowHistogram,
    WindowSpec,
)
from monitor.exporter import exposition
from monitor.exporter.config import ExporterConfig
from monitor.exporter.hold import PeakHold, Values, largest
from monitor.exporter.native import rebin
from monitor.exporter.prerender import Prerenderer
from monitor.exporter.table import Snapshot, WindowTable
from runtime.webconfig import WebConfig
from streaming.counters import COUNTER_FIELDS, StreamCounters

if TYPE_CHECKING:
    from runtime.webserver import MetricsServer

log = logging.getLogger("nines.exporter")

#: ``le`` boundaries (seconds) of ``nines_latency_classic_seconds`` (the SLA's layout).
DEFAULT_LE: tuple[float, ...] = BUCKET_BOUNDARIES_S
#: The settings of an exporter built without any (tests, benches): the model's defaults.
DEFAULT_CONFIG = ExporterConfig()
#: Scrapers (by address) whose last scrape time is kept, to notice one that comes back later
#: than the hold; the oldest is forgotten beyond this (an HA pair needs two).
MAX_SCRAPERS = 64

#: The body formats: the text format, and delimited protobuf (``core.promproto``).
TEXT = "text"
PROTOBUF = "protobuf"

#: (resolution, series): one exported series of one resolution.
WindowKey = tuple[str, SeriesKey]


@dataclass
class _Histograms:
    """Cumulative ``le`` buckets, count and sum of each series since the exporter started."""

    buckets: dict[SeriesKey, list[int]] = field(default_factory=dict)
    count: dict[SeriesKey, int] = field(default_factory=dict)
    sum_s: dict[SeriesKey, float] = field(default_factory=dict)
    #: each series' exposition lines, rendered when a window adds to it (a scrape only joins)
    lines: dict[SeriesKey, str] = field(default_factory=dict)
    #: the same as a protobuf histogram message
    pb: dict[SeriesKey, bytes] = field(default_factory=dict)
    #: the series' merged HDR histogram, re-binned into its native histogram
    hdr: dict[SeriesKey, SparseHistogram] = field(default_factory=dict)
    #: the series' native schema: never finer than before (a coarser one is not a reset)
    schema: dict[SeriesKey, int] = field(default_factory=dict)
    native_lines: dict[SeriesKey, str] = field(default_factory=dict)
    native_pb: dict[SeriesKey, bytes] = field(default_factory=dict)

    def stores(self) -> tuple[dict[SeriesKey, Any], ...]:
        """Every per-series store (a series that leaves is dropped from each)."""
        return (
            self.buckets,
            self.count,
            self.sum_s,
            self.lines,
            self.pb,
            self.hdr,
            self.schema,
            self.native_lines,
            self.native_pb,
        )


def _values(reads: ManyReads, i: int) -> Values:
    """One window's max and quantiles (None where too few samples), as ``hold`` keeps them."""
    return (int(reads.max_us[i]), *(None if v < 0 else v for v in reads.values[i].tolist()))


def _add(into: dict[Any, int], key: Any, value: int) -> None:
    into[key] = into.get(key, 0) + int(value)


#: What the series cap counts: (cluster, topic, partition, broker), all kinds together.
SeriesId = tuple[str, str, str, str]


def _series_id(s: SeriesKey) -> SeriesId:
    return (s.cluster, s.topic, s.partition, s.broker)


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
        #: series id (partition and topic series, broker rollups) → resolutions it has a window in
        self._admitted: dict[SeriesId, set[str]] = {}
        self.series_rejected = 0
        self.series_evicted = 0
        self.quantiles = tuple(quantiles)
        self.le_seconds = tuple(le_seconds)
        #: the stream job's resolutions, parsed once (``StreamConfig.spec``): the finest one's
        #: windows feed the cumulative histograms and counters
        self.windows = windows
        self._lock = threading.Lock()
        self._latest: dict[tuple[str, SeriesKey], WindowHistogram] = {}
        #: resolution → the latest window's values of each of its series (``table``)
        self._tables: dict[str, WindowTable] = {}
        #: (format, resolution) → the table's ``layout`` and its groups' encoded label prefixes
        #: in exposition order (scrapes only)
        self._prefixes: dict[
            tuple[str, str], tuple[int, tuple[exposition.PrefixTable, exposition.PrefixTable]]
        ] = {}
        #: format → counter families' keys in order, with their encoded labels (scrapes only)
        self._counter_order = {TEXT: exposition.CounterOrder(), PROTOBUF: exposition.CounterOrder()}
        #: format → rows encoded so far (a resolution's rows, when its windows changed)
        self.encoded_rows: dict[str, int] = {TEXT: 0, PROTOBUF: 0}
        #: format → resolution → its windows' lines joined per family, until one of them changes
        self._chunks: dict[str, dict[str, tuple[tuple[bytes, ...], tuple[bytes, ...]]]] = {
            TEXT: {},
            PROTOBUF: {},
        }
        #: resolution → how often its chunk was let go (a chunk joined outside the lock is kept
        #: only if its resolution did not change meanwhile)
        self._chunk_gen: dict[str, int] = {}
        #: bumped by every change a scrape can see; the body of a version is rendered once
        self._version = 0
        #: format → (version, its body's parts); and joined, once something asks for the bytes
        self._body: dict[str, tuple[int, tuple[bytes, ...]]] = {}
        self._joined: dict[str, tuple[tuple[bytes, ...], bytes]] = {}
        #: one render at a time: concurrent scrapes of one version share its body
        self._render_lock = threading.Lock()
        #: format → when a scrape last asked for it: only the formats scraped within
        #: ``peak_hold`` (longer than any scrape interval) are pre-rendered
        self._scraped: dict[str, float] = {}
        #: format → the server's compressor of its bodies (``prerender``), primed with the
        #: coarse resolutions' chunks when their windows change
        self._compressors: dict[str, PartsGzip] = {}
        #: the background worker that encodes and deflates those chunks (None: scrapes do)
        self._prerenderer: Prerenderer | None = None
        #: a resolution other than the finest changed since the last kick of the worker
        self._coarse_changed = False
        #: the histograms' series in exposition order; None: sort again
        self._hist_order: list[SeriesKey] | None = None
        self._quantile_texts = [floatToGoString(q) for q in self.quantiles]
        self._le_us = [int(le * 1e6) for le in self.le_seconds]
        self._le_texts = [floatToGoString(le) for le in self.le_seconds]
        self._window_end: dict[str, int] = {}
        self._counters: dict[str, dict[Any, int]] = {name: {} for name in COUNTER_FIELDS}
        self._counters["bad"].update(dict.fromkeys(BAD_REASONS, 0))
        self._hist = _Histograms()
        self._health: dict[str, float] = {}
        self._batches = 0
        self._clock = clock
        #: the held peaks of the ``partition="all"`` series (``hold``)
        self._peaks: PeakHold[WindowKey] = PeakHold(config.peak_hold)
        #: scraper address → when it last scraped (``scraped``), oldest first
        self._scrapers: OrderedDict[str, float] = OrderedDict()
        #: scrapes that came more than ``peak_hold`` after the same scraper's previous one
        self.scrape_gaps = 0
        self._gap_logged: set[str] = set()

    def update(
        self, windows: Sequence[WindowHistogram], counters: StreamCounters | None = None
    ) -> None:
        """Take a batch of closed windows (each final) and the batch's counters.

        Only the numbers are kept here (``table``): encoding them is a scrape's, once per
        resolution whose windows changed, so a window superseded before the next scrape is
        never encoded; but a coarser resolution's change kicks the pre-render worker, if any
        (``prerender``), which encodes it off the scrape path.
        """
        with self._lock:
            now = self._clock()
            #: series whose held peak may have changed: a held max let go, or a window held
            stale = self._peaks.expire(now)
            admitted = []
            for w in windows:
                if self._admit(w):
                    admitted.append(w)
                else:
                    self.series_rejected += 1  # beyond max_series: counted, never silent
            reads = quantiles_of_many([w.hist for w in admitted], self.quantiles)
            #: resolution → series → the batch's latest window of it (index into admitted)
            newest: dict[str, dict[SeriesKey, int]] = {}
            finest, per_partition = self.windows.finest, self.config.partition_histograms
            totals, overflow = reads.totals.tolist(), reads.overflow.tolist()
            latest, ends = self._latest, self._window_end
            for i, w in enumerate(admitted):
                res, series = w.resolution, w.series
                key = (res, series)
                merged = series.partition == ALL_PARTITIONS  # topic, broker and hiccup series
                if merged:
                    self._peaks.hold(key, _values(reads, i), now)
                    stale.add(key)
                current = latest.get(key)
                if current is None or w.window_end_us >= current.window_end_us:
                    latest[key] = w
                    got = newest.get(res)
                    if got is None:
                        got = newest[res] = {}
                    got[series] = i
                if w.window_end_us > ends.get(res, 0):
                    ends[res] = w.window_end_us
                if res == finest and not series.broker:
                    # broker rollups hold the topic's samples again: never in the histogram
                    if merged != per_partition:
                        self._accumulate(w)
                    if not merged and counters is None:
                        self._derive_counts(w, totals[i], overflow[i])
            for res, got in newest.items():
                self._dirty(res)
                table = self._tables.get(res)
                if table is None:
                    table = self._tables[res] = WindowTable(res, len(self.quantiles))
                rows = table.rows_for(list(got))
                at = np.fromiter(got.values(), dtype=np.int64, count=len(got))
                table.end_us[rows] = [admitted[i].window_end_us for i in at.tolist()]
                table.span_us[rows] = [
                    admitted[i].window_end_us - admitted[i].window_start_us for i in at.tolist()
                ]
                table.max_us[rows] = reads.max_us[at]
                table.total[rows] = reads.totals[at]
                table.lost[rows] = [admitted[i].lost for i in at.tolist()]
                table.quantiles_us[rows] = reads.values[at]
            if counters is not None:
                for name in COUNTER_FIELDS:
                    into = self._counters[name]
                    for k, v in getattr(counters, name).items():
                        _add(into, k, v)
            self._evict_stale()
            self._bound_systems()
            self._render_peaks(stale)
            self._version += 1
            kick = self._coarse_changed and self._prerenderer is not None and bool(self._scraped)
            self._coarse_changed = False
        if kick and self._prerenderer is not None:
            self._prerenderer.kick()

    def scraped(self, scraper: str) -> None:
        """Note a scrape by ``scraper``; one later than ``peak_hold`` after its previous one is
        a gap (counted, logged once per scraper): a held peak may have expired unseen in it."""
        with self._lock:
            now = self._clock()
            last = self._scrapers.pop(scraper, None)
            self._scrapers[scraper] = now
            if len(self._scrapers) > MAX_SCRAPERS:
                self._scrapers.popitem(last=False)
            if last is not None and now - last > self.config.peak_hold:
                self.scrape_gaps += 1
                self._version += 1
                if scraper not in self._gap_logged and len(self._gap_logged) < MAX_SCRAPERS:
                    self._gap_logged.add(scraper)
                    log.warning(
                        "scraper %s came back after %.0f s, longer than peak_hold (%.0f s): "
                        "window maxima in between may be unseen; scrape more often or raise "
                        "the stream's peak_hold (nines_scrape_gaps_total counts these)",
                        scraper,
                        now - last,
                        self.config.peak_hold,
                    )

    def _render_peaks(self, keys: set[WindowKey]) -> None:
        """Bring the held peaks of ``keys`` up to date (a change re-encodes the resolution)."""
        for key in keys:
            res, series = key
            table = self._tables.get(res)
            if table is None or series not in table:
                continue
            if table.set_peak(series, self._peak(key, table.latest(series))):
                self._dirty(res)

    def _peak(self, key: WindowKey, latest: Values) -> Values:
        """The held peak of a series, never below its latest window."""
        held = self._peaks.peak(key)
        return largest([held, latest]) if held is not None else latest

    def _admit(self, w: WindowHistogram) -> bool:
        """Whether the window's series is kept: known already, or new and under the cap."""
        sid = _series_id(w.series)
        resolutions = self._admitted.get(sid)
        if resolutions is None:
            if len(self._admitted) >= self.config.max_series:
                return False
            resolutions = self._admitted[sid] = set()
        resolutions.add(w.resolution)
        return True

    def _bound_systems(self) -> None:
        """Systems are kept only for clusters with an admitted series: bounded by the cap."""
        systems = self._counters["systems"]
        if systems:
            live = {sid[0] for sid in self._admitted}
            for key in [k for k in systems if k[0] not in live]:
                del systems[key]

    def _evict_stale(self) -> None:
        """Drop series with no closed window for ``series_ttl_windows`` of their resolution.

        A partition or probe that went away must leave /metrics (and memory) rather than be
        exported forever at its last value; its cumulative series go with its finest windows.
        """
        stale = [
            (res, series)
            for res, table in self._tables.items()
            for series in table.stale(self._window_end[res], self.config.series_ttl_windows)
        ]
        cum = self._hist
        for res, series in stale:
            del self._latest[(res, series)]
            self._tables[res].drop(series)
            self._peaks.drop((res, series))
            self._dirty(res)
            self.series_evicted += 1
            sid = _series_id(series)
            if not any((res, SeriesKey(*sid[:3], kind, sid[3])) in self._latest for kind in KINDS):
                left = self._admitted.get(sid)
                if left is not None:
                    left.discard(res)
                    if not left:
                        del self._admitted[sid]
                        if not series.broker:  # counters are per partition, never per broker
                            self._forget_counters(sid[:3])
            if res == self.windows.finest:
                self._hist_order = None
                for store in cum.stores():
                    store.pop(series, None)

    def _accumulate(self, w: WindowHistogram) -> None:
        """Add a finest window to its series' cumulative buckets and re-render their lines."""
        s, cum = w.series, self._hist
        if s not in cum.buckets:
            self._hist_order = None
        buckets = cum.buckets.setdefault(s, [0] * len(self.le_seconds))
        for i, c in enumerate(w.hist.counts_at_or_below(self._le_us)):
            buckets[i] += c
        _add(cum.count, s, w.hist.total)
        cum.sum_s[s] = cum.sum_s.get(s, 0.0) + w.hist.sum_us / 1e6
        cum.lines[s] = exposition.histogram_lines(
            s, self._le_texts, buckets, cum.count[s], cum.sum_s[s]
        )
        cum.pb[s] = exposition.histogram_pb(s, self.le_seconds, buckets, cum.count[s], cum.sum_s[s])
        merged = cum.hdr[s].merge(w.hist) if s in cum.hdr else w.hist
        cum.hdr[s] = merged
        native = rebin(
            merged, cum.schema.get(s, self.config.native_schema), self.config.native_max_buckets
        )
        cum.schema[s] = native.schema
        cum.native_lines[s] = exposition.native_lines(s, cum.count[s], cum.sum_s[s])
        cum.native_pb[s] = exposition.native_pb(s, native, cum.count[s], cum.sum_s[s])

    def _derive_counts(self, w: WindowHistogram, total: int, overflow: int) -> None:
        """Echo, loss and overflow counters from a partition's finest window (no job counters);
        ``total`` and ``overflow`` are its histogram's (read for the whole batch at once)."""
        s = w.series
        if s.kind == "e2e":
            topic = (s.cluster, s.topic, s.partition)
            _add(self._counters["echoes"], topic, total)
            _add(self._counters["lost"], topic, w.lost)
        if overflow:
            _add(self._counters["overflow"], s, overflow)

    def _forget_counters(self, triple: tuple[str, ...]) -> None:
        """A series gone from every resolution takes its cumulative counters along."""

        def of_triple(key: Any) -> bool:
            if isinstance(key, SeriesKey):
                return (key.cluster, key.topic, key.partition) == triple
            return bool(key == triple)

        for into in self._counters.values():
            for key in [k for k in into if of_triple(k)]:
                del into[key]

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
            self._version += 1

    def latest_windows(self, brokers: bool = False) -> dict[str, list[WindowHistogram]]:
        """Resolution → the latest closed window of each series (for live views).

        Per-broker rollups only with ``brokers``: they hold the same samples as the topic's.
        """
        with self._lock:
            out: dict[str, list[WindowHistogram]] = {}
            for (res, series), w in self._latest.items():
                if brokers or not series.broker:
                    out.setdefault(res, []).append(w)
            return out

    def _dirty(self, res: str) -> None:
        """A window of ``res`` changed: its chunk is joined again at the next scrape."""
        for chunks in self._chunks.values():
            chunks.pop(res, None)
        self._chunk_gen[res] = self._chunk_gen.get(res, 0) + 1
        if res != self.windows.finest:
            self._coarse_changed = True

    def prerender(self, compressors: Mapping[str, PartsGzip]) -> None:
        """Encode the chunks of the resolutions other than the finest, and deflate them with
        ``compressors`` (format → the server's compressor of that format's bodies), in a
        background worker when their windows change, rather than in the next scrape.

        Their windows close rarely (the 1 h ones once an hour, all at once): a scrape right
        after would encode and compress the whole body, over the scrape's CPU budget in
        protobuf (docs/metrics.md). Only the formats scraped within ``peak_hold`` are rendered
        (a format nobody scrapes costs nothing), and deflated only by a compressor that has
        compressed a body (a scraper that asks for gzip)."""
        with self._lock:
            self._compressors = dict(compressors)
            if self._prerenderer is None:
                self._prerenderer = Prerenderer(self._prerender)

    def wait_prerendered(self, timeout_s: float = 60.0) -> bool:
        """Whether the pre-render worker is idle within ``timeout_s`` (benches and tests: its
        CPU is counted with the update that made the work, never hidden in a scrape's)."""
        worker = self._prerenderer
        return worker is None or worker.wait(timeout_s)

    @property
    def prerender_cpu_s(self) -> float:
        """CPU seconds the pre-render worker has spent so far."""
        worker = self._prerenderer
        return 0.0 if worker is None else worker.cpu_s

    def _prerender(self) -> None:
        """The worker's run: encode the coarse resolutions' chunks a scrape would, then prime
        the compressors with them. A scrape that comes meanwhile waits for the render lock (or
        the compressor's) and takes the result; a chunk whose resolution changed again while
        it was encoded is dropped (``_chunk_gen``), as a scrape's is, so no body is stale."""
        with self._render_lock:
            with self._lock:
                finest = self.windows.finest
                coarse = [res for res in sorted(self._window_end) if res != finest]
                now = self._clock()
                fmts = [
                    fmt
                    for fmt in (TEXT, PROTOBUF)
                    if now - self._scraped.get(fmt, -np.inf) <= self.config.peak_hold
                ]
                todo = [(f, res) for f in fmts for res in coarse if res not in self._chunks[f]]
                snaps = {res: self._tables[res].snapshot() for _, res in todo}
                gens = {res: self._chunk_gen.get(res, 0) for res in snaps}
            encoded = {(fmt, res): self._encode(fmt, snaps[res]) for fmt, res in todo}
            with self._lock:
                for (fmt, res), chunk in encoded.items():
                    if self._chunk_gen.get(res, 0) == gens[res]:
                        self._chunks[fmt][res] = chunk
                primes = [
                    (
                        packer,
                        [
                            part
                            for res in coarse
                            if res in self._chunks[fmt]
                            for group in self._chunks[fmt][res]
                            for part in group
                        ],
                    )
                    for fmt, packer in self._compressors.items()
                    if fmt in fmts and packer.compressions
                ]
        # outside the render lock: a scrape renders meanwhile, and its compression waits for
        # the compressor's lock, then reuses what was deflated here
        for packer, parts in primes:
            packer.prime(parts)

    def _encode(self, fmt: str, snap: Snapshot) -> tuple[tuple[bytes, ...], tuple[bytes, ...]]:
        """A resolution's chunks (topic and partition series, broker rollups) in ``fmt``, from
        its values and the label prefixes cached per series (scrapes only: under the render
        lock, outside the state's)."""
        key = (fmt, snap.resolution)
        cached = self._prefixes.get(key)
        if cached is None:
            groups = tuple(
                exposition.PrefixTable(series, snap.resolution, self._quantile_texts, fmt)
                for series in snap.series
            )
        elif cached[0] != snap.layout:
            groups = tuple(
                old.carry(series) for old, series in zip(cached[1], snap.series, strict=True)
            )
        else:
            groups = cached[1]
        topics_pre, brokers_pre = groups
        self._prefixes[key] = (snap.layout, (topics_pre, brokers_pre))
        self.encoded_rows[fmt] += sum(len(group) for group in snap.series)
        topics, brokers = (
            exposition.encode_chunk(
                (topics_pre, brokers_pre)[g],
                snap.max_us[g],
                snap.total[g],
                snap.lost[g],
                snap.quantiles_us[g],
                snap.peak_max_us[g],
                snap.peak_quantiles_us[g],
                fmt,
            )
            for g in range(2)
        )
        return topics, brokers

    def exposition(self) -> bytes:
        """The whole /metrics body in the Prometheus text format (version 0.0.4).

        The same ``bytes`` until something changes (the server sends ``exposition_parts``). A
        micro-batch waits for a scrape at most while the scrape copies references and counters
        under the lock: joining the lines (70 MB at 10,000 partitions) happens outside it.
        """
        return self._joined_body(TEXT)

    def exposition_protobuf(self) -> bytes:
        """The same families as delimited protobuf MetricFamily messages (with the native
        histogram's buckets), cached and joined as ``exposition`` is."""
        return self._joined_body(PROTOBUF)

    def _joined_body(self, fmt: str) -> bytes:
        """``exposition_parts`` joined, once per body (tests and benches read the bytes)."""
        parts = self.exposition_parts(fmt)
        joined = self._joined.get(fmt)
        if joined is not None and joined[0] is parts:
            return joined[1]
        body = b"".join(parts)
        self._joined[fmt] = (parts, body)
        return body

    def exposition_parts(self, fmt: str = TEXT) -> tuple[bytes, ...]:
        """The body of ``fmt`` (``TEXT`` or ``PROTOBUF``) in parts, the same tuple until
        something changes: what the server sends, compressing a part that stayed the same object
        (a resolution's chunk) only once (``core.gzip_parts``)."""
        with self._render_lock:
            with self._lock:
                self._scraped[fmt] = self._clock()
                version = self._version
                cached = self._body.get(fmt)
                if cached is not None and cached[0] == version:
                    return cached[1]
                resolutions = sorted(self._window_end)
                kept = self._chunks[fmt]
                done = {res: kept[res] for res in resolutions if res in kept}
                snaps = {
                    res: self._tables[res].snapshot() for res in resolutions if res not in done
                }
                gens = {res: self._chunk_gen.get(res, 0) for res in snaps}
                brokers = any(self._tables[res].brokers() for res in resolutions)
                end = exposition.window_end_family(dict(self._window_end))
                counters = {k: dict(v) for k, v in self._counters.items()}
                rest = [
                    *exposition.series_families(
                        len(self._admitted),
                        self.config.max_series,
                        self.series_rejected,
                        self.series_evicted,
                    ),
                    *exposition.health_families(self._health, self._batches),
                    *exposition.scrape_families(self.config.peak_hold, self.scrape_gaps),
                ]
                cum = self._hist
                if self._hist_order is None:
                    self._hist_order = sorted(cum.lines, key=exposition.series_key)
                order = self._hist_order
                if fmt == TEXT:
                    hist = [cum.lines[s] for s in order]
                    native = [cum.native_lines[s] for s in order]
                else:
                    hist_pb = [cum.pb[s] for s in order]
                    native_pb = [cum.native_pb[s] for s in order]
            # outside the lock: micro-batches go on while the body is joined
            for res, snap in snaps.items():
                done[res] = self._encode(fmt, snap)
            chunks = [done[res] for res in resolutions]
            join = exposition.window_text if fmt == TEXT else exposition.window_pb
            windows = join([topics for topics, _ in chunks])
            if brokers:
                windows += join([b for _, b in chunks], exposition.BROKER_WINDOW_FAMILIES)
            if fmt == TEXT:
                hists = exposition.histogram_text(hist) + exposition.histogram_text(
                    native, exposition.NATIVE, exposition.NATIVE_HELP
                )
                body = exposition.body(
                    windows,
                    end,
                    hists,
                    exposition.counter_text(counters, self._counter_order[fmt]),
                    rest,
                )
            else:
                hists_pb = [
                    *exposition.histogram_family_pb(hist_pb),
                    *exposition.histogram_family_pb(
                        native_pb, exposition.NATIVE, exposition.NATIVE_HELP
                    ),
                ]
                body = exposition.body_pb(
                    windows,
                    end,
                    hists_pb,
                    exposition.counter_pb(counters, self._counter_order[fmt]),
                    rest,
                )
            with self._lock:
                for res in snaps:  # kept unless a window of the resolution changed meanwhile
                    if self._chunk_gen.get(res, 0) == gens[res]:
                        self._chunks[fmt][res] = done[res]
                whole = tuple(body)
                self._body[fmt] = (version, whole)
            return whole

    def serve(
        self, host: str = "127.0.0.1", port: int = 9464, web: WebConfig | None = None
    ) -> MetricsServer:
        """Serve /metrics from this exporter; port 0 picks a free port; ``web``: TLS/auth."""
        from core import promproto
        from runtime.webserver import MetricsServer

        server = MetricsServer(
            lambda: self.exposition_parts(TEXT),
            host,
            port,
            web,
            on_scrape=self.scraped,
            protobuf=lambda: self.exposition_parts(PROTOBUF),
        )
        self.prerender(
            {
                TEXT: server.compressor(server.content_type),
                PROTOBUF: server.compressor(promproto.CONTENT_TYPE),
            }
        )
        return server
