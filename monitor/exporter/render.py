"""The renderer: the /metrics body of every format from the collectors' state, cached by version.

Collectors (``series``, ``latest``, ``cumulative``, ``counters``, ``scrapes``) only update their
own state and bump their own generations; none holds the renderer or another collector. The
renderer owns the rest: the locks, the version of a body (the tuple of the collectors'
generations, so no change can be missed), the caches (a resolution's encoded chunk per format,
kept while its generation stands; each body's parts) and the pre-render worker.

Two locks, taken in one order, enforced here (``Locks``): ``render`` (one render at a time, so
concurrent scrapes of one version share its body) before ``state`` (the collectors' state, which
a micro-batch updates). A scrape copies what it encodes under ``state`` and encodes outside it, so
a micro-batch waits only for the copies. The body of a version is rendered once.

The coarser resolutions' windows close rarely and all at once (the 1 h ones: the whole body
changes), so a background worker encodes and deflates their chunks when they arrive
(``prerender``), and the hourly scrape costs what the others do.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from prometheus_client.utils import floatToGoString

from core.gzip_parts import PartsGzip
from monitor.exporter import contract, protobuf, samples, text
from monitor.exporter.config import ExporterConfig
from monitor.exporter.counters import Counters
from monitor.exporter.cumulative import CumulativeHistograms
from monitor.exporter.latest import LatestWindows
from monitor.exporter.prerender import Prerenderer
from monitor.exporter.scrapes import ScrapeGaps
from monitor.exporter.series import SeriesBook
from monitor.exporter.window_rows import Snapshot

#: The body formats: the text format, and delimited protobuf (``core.promproto``).
TEXT = "text"
PROTOBUF = "protobuf"
FORMATS = (TEXT, PROTOBUF)

#: A resolution's chunk in one format: topic and partition series, broker rollups.
Chunk = tuple[tuple[bytes, ...], tuple[bytes, ...]]


class Locks:
    """The state lock and the render lock, in the one order allowed: render, then state.

    Taking ``render`` while holding ``state`` raises (a deadlock with a scrape otherwise), so the
    order is checked in code, not kept by a comment.
    """

    def __init__(self) -> None:
        self._state = threading.Lock()
        self._render = threading.Lock()
        self._held = threading.local()

    @contextlib.contextmanager
    def state(self) -> Iterator[None]:
        """The collectors' state: every update and every copy a render takes."""
        with self._state:
            self._held.state = True
            try:
                yield
            finally:
                self._held.state = False

    @contextlib.contextmanager
    def render(self) -> Iterator[None]:
        """One render at a time (never taken under ``state``)."""
        if getattr(self._held, "state", False):
            raise RuntimeError("the render lock is taken before the state lock, never under it")
        with self._render:
            yield


@dataclass(frozen=True)
class Collectors:
    """What the exporter exports, each part updating only itself."""

    series: SeriesBook
    latest: LatestWindows
    cumulative: CumulativeHistograms
    counters: Counters
    scrapes: ScrapeGaps

    def version(self) -> tuple[int, ...]:
        """Every collector's generation: a body of this version is current."""
        return (
            self.series.generation,
            self.latest.generation,
            self.cumulative.generation,
            self.counters.generation,
            self.scrapes.generation,
        )


class Renderer:
    """Bodies of the collectors' state in each format, rendered once per version."""

    def __init__(
        self,
        collectors: Collectors,
        config: ExporterConfig,
        finest: str,
        quantiles: Sequence[float],
        clock: Callable[[], float],
    ) -> None:
        self.collectors = collectors
        self.config = config
        self.finest = finest
        self.locks = Locks()
        self._clock = clock
        self._quantile_texts = [floatToGoString(q) for q in quantiles]
        #: (format, resolution) → the table's ``layout`` and its groups' encoded label prefixes
        self._prefixes: dict[
            tuple[str, str], tuple[int, tuple[samples.PrefixTable, samples.PrefixTable]]
        ] = {}
        #: format → counter families' keys in order, with their encoded labels
        self._counter_order = {fmt: samples.CounterOrder() for fmt in FORMATS}
        #: format → rows encoded so far (a resolution's rows, when its windows changed)
        self.encoded_rows: dict[str, int] = dict.fromkeys(FORMATS, 0)
        #: format → resolution → (the resolution's generation, its chunk)
        self._chunks: dict[str, dict[str, tuple[int, Chunk]]] = {fmt: {} for fmt in FORMATS}
        #: format → (version, its body's parts)
        self._body: dict[str, tuple[tuple[int, ...], tuple[bytes, ...]]] = {}
        #: format → when a scrape last asked for it: only the formats asked for within
        #: ``config.prerender_within_s`` are pre-rendered
        self._asked: dict[str, float] = {}
        #: format → the server's compressor of its bodies, primed with the coarse chunks
        self._compressors: dict[str, PartsGzip] = {}
        #: the background worker that encodes and deflates those chunks (None: scrapes do)
        self.prerenderer: Prerenderer | None = None
        #: the coarse resolutions' generations the worker was last kicked for
        self._kicked: dict[str, int] = {}

    def _chunk(self, fmt: str, res: str) -> Chunk | None:
        """The cached chunk of ``res`` if its resolution has not changed since (under state)."""
        got = self._chunks[fmt].get(res)
        if got is None or got[0] != self.collectors.latest.generations.get(res, 0):
            return None
        return got[1]

    def _keep(self, fmt: str, res: str, generation: int, chunk: Chunk) -> None:
        """Cache a chunk encoded from ``generation`` unless its resolution changed meanwhile."""
        if self.collectors.latest.generations.get(res, 0) == generation:
            self._chunks[fmt][res] = (generation, chunk)

    def updated(self) -> None:
        """After an update: kick the pre-render worker if a coarse resolution changed and some
        format has been asked for."""
        worker = self.prerenderer
        if worker is None:
            return
        with self.locks.state():
            gens = self.collectors.latest.generations
            coarse = {res: g for res, g in gens.items() if res != self.finest}
            kick = coarse != self._kicked and bool(self._asked)
            self._kicked = coarse
        if kick:
            worker.kick()

    def prerender(self, compressors: Mapping[str, PartsGzip]) -> None:
        """Encode the chunks of the resolutions other than the finest, and deflate them with
        ``compressors`` (format → the server's compressor of that format's bodies), in a
        background worker when their windows change, rather than in the next scrape.

        Their windows close rarely (the 1 h ones once an hour, all at once): a scrape right
        after would encode and compress the whole body, over the scrape's CPU budget in
        protobuf (docs/metrics.md). Only the formats asked for lately are rendered (a format
        nobody scrapes costs nothing), and deflated only by a compressor that has compressed a
        body (a scraper that asks for gzip)."""
        with self.locks.state():
            self._compressors = dict(compressors)
            if self.prerenderer is None:
                self.prerenderer = Prerenderer(self._prerender)

    def _prerender(self) -> None:
        """The worker's run: encode the coarse resolutions' chunks a scrape would, then prime
        the compressors with them. A scrape that comes meanwhile waits for the render lock (or
        the compressor's) and takes the result; a chunk whose resolution changed again while
        it was encoded is not kept, as a scrape's is not, so no body is stale."""
        latest = self.collectors.latest
        with self.locks.render():
            with self.locks.state():
                coarse = [res for res in latest.resolutions() if res != self.finest]
                now = self._clock()
                within = self.config.prerender_within_s
                fmts = [f for f in FORMATS if now - self._asked.get(f, -np.inf) <= within]
                todo = [(f, res) for f in fmts for res in coarse if self._chunk(f, res) is None]
                snaps = {res: latest.snapshot(res) for _, res in todo}
                gens = {res: latest.generations.get(res, 0) for res in snaps}
            encoded = {(fmt, res): self._encode(fmt, snaps[res]) for fmt, res in todo}
            with self.locks.state():
                for (fmt, res), chunk in encoded.items():
                    self._keep(fmt, res, gens[res], chunk)
                primes = []
                for fmt, packer in self._compressors.items():
                    if fmt not in fmts or not packer.compressions:
                        continue
                    chunks = [c for c in (self._chunk(fmt, res) for res in coarse) if c]
                    primes.append((packer, [p for c in chunks for group in c for p in group]))
        # outside the render lock: a scrape renders meanwhile, and its compression waits for
        # the compressor's lock, then reuses what was deflated here
        for packer, parts in primes:
            packer.prime(parts)

    def _encode(self, fmt: str, snap: Snapshot) -> Chunk:
        """A resolution's chunks (topic and partition series, broker rollups) in ``fmt``, from
        its values and the label prefixes cached per series (under the render lock only)."""
        key = (fmt, snap.resolution)
        cached = self._prefixes.get(key)
        if cached is None:
            groups = tuple(
                samples.PrefixTable(series, snap.resolution, self._quantile_texts, fmt)
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
            samples.encode_chunk(
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

    def parts(self, fmt: str = TEXT) -> tuple[bytes, ...]:
        """The body of ``fmt`` (``TEXT`` or ``PROTOBUF``) in parts, the same tuple until
        something changes: what the server sends, compressing a part that stayed the same object
        (a resolution's chunk) only once (``core.gzip_parts``). Only the copies are taken under
        the state lock: joining the lines (tens of MB at the series cap) happens outside it."""
        c = self.collectors
        with self.locks.render():
            with self.locks.state():
                self._asked[fmt] = self._clock()
                version = c.version()
                cached = self._body.get(fmt)
                if cached is not None and cached[0] == version:
                    return cached[1]
                resolutions = c.latest.resolutions()
                done = {res: got for res in resolutions if (got := self._chunk(fmt, res))}
                snaps = {res: c.latest.snapshot(res) for res in resolutions if res not in done}
                gens = {res: c.latest.generations.get(res, 0) for res in snaps}
                brokers = c.latest.brokers()
                end = contract.window_end_family(c.latest.window_end())
                counters, health, batches = c.counters.snapshot()
                rest = [
                    *contract.series_families(
                        len(c.series), c.series.max_series, c.series.rejected, c.series.evicted
                    ),
                    *contract.health_families(health, batches),
                    *contract.scrape_families(self.config.peak_hold, c.scrapes.gaps),
                ]
                if fmt == TEXT:
                    hist, native = c.cumulative.text()
                else:
                    hist_pb, native_pb = c.cumulative.protobuf()
            # outside the state lock: micro-batches go on while the body is joined
            for res, snap in snaps.items():
                done[res] = self._encode(fmt, snap)
            chunks = [done[res] for res in resolutions]
            join = text.window_text if fmt == TEXT else protobuf.window_pb
            windows = join([topics for topics, _ in chunks])
            if brokers:
                windows += join([b for _, b in chunks], contract.BROKER_WINDOW_FAMILIES)
            if fmt == TEXT:
                hists = text.histogram_text(hist) + text.histogram_text(
                    native, contract.NATIVE, contract.NATIVE_HELP
                )
                body = text.body(
                    windows,
                    end,
                    hists,
                    samples.counter_text(counters, self._counter_order[fmt]),
                    rest,
                )
            else:
                hists_pb = [
                    *protobuf.histogram_family_pb(hist_pb),
                    *protobuf.histogram_family_pb(native_pb, contract.NATIVE, contract.NATIVE_HELP),
                ]
                body = protobuf.body_pb(
                    windows,
                    end,
                    hists_pb,
                    samples.counter_pb(counters, self._counter_order[fmt]),
                    rest,
                )
            with self.locks.state():
                for res in snaps:
                    self._keep(fmt, res, gens[res], done[res])
                whole = tuple(body)
                self._body[fmt] = (version, whole)
            return whole
