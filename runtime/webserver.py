"""The /metrics server of the probe and the exporter: serves a body to scrapers (gzip, TLS, auth).

The server other modules import: it answers ``/metrics`` (render, content negotiation, gzip,
credentials) and the health paths, over rooms of one job each: the event loop that holds the
sockets (``runtime.webloop``) and its handler threads (``runtime.webhandlers``), the policy of
whom it cuts and when (``runtime.webpolicy``) and HTTP/1.1 over a request head
(``runtime.webhttp``).

Not prometheus_client's ``start_http_server``: that one renders a registry on every scrape in one
thread per client with no timeouts and does the TLS handshake in its accept loop, so one client
that connects and sends nothing stalls every scrape and the shutdown. What this one promises (an
idle, trickling, slow-reading or flooding client costs a bounded share and never a scrape), the
rules that keep the promise and the floods that chose them are in docs/architecture.md ("/metrics
that no client can black out"); the figures are in docs/benchmarks.md.

The limits below are read when a server starts: a test or ``tests/metrics_flood.py`` sets them
here, on this module, before it starts one.
"""

from __future__ import annotations

import ssl
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from core import promproto
from core.gzip_parts import PartsGzip
from runtime.webconfig import READY_PATH, UNAUTHORIZED_HEADERS, WebConfig
from runtime.webhttp import MAX_HEAD_BYTES, Exchange, Outcome, accepts_gzip, exchange
from runtime.webloop import Conn, Loop
from runtime.webpolicy import (
    EVICT_MIN_AGE_S,
    KEEPALIVE_IDLE_S,
    LINGER_S,
    MAX_CONNECTIONS,
    READ_TIMEOUT_S,
    STALLED_WRITE_S,
    TLS_HANDSHAKE_TIMEOUT_S,
    TURN_S,
    WRITE_TIMEOUT_S,
    Limits,
)

__all__ = [
    "EVICT_MIN_AGE_S",
    "GZIP_LEVEL",
    "HEALTH_PATHS",
    "KEEPALIVE_IDLE_S",
    "LINGER_S",
    "MAX_CONNECTIONS",
    "MAX_HEAD_BYTES",
    "MAX_RENDERS",
    "METRICS_PATH",
    "PROTOBUF_GZIP_LEVEL",
    "READ_TIMEOUT_S",
    "RENDER_WAIT_S",
    "RETRY_AFTER_S",
    "STALLED_WRITE_S",
    "TLS_HANDSHAKE_TIMEOUT_S",
    "TURN_S",
    "WRITE_TIMEOUT_S",
    "Body",
    "MetricsServer",
    "accepts_gzip",
    "route",
]


#: zlib level of gzipped text scrapes: level 4 keeps a scrape at 10,000 probe partitions within
#: its 0.5 s budget and its bytes within 5 MB, for half level 6's CPU (docs/benchmarks.md,
#: "Scrape cost at the series cap"; ``bench.cardinality``).
GZIP_LEVEL = 4
#: zlib level of gzipped protobuf scrapes: 8-byte doubles compress less than their text, and
#: level 6 is what keeps the body at 10,000 partitions under 5 MB (docs/benchmarks.md).
PROTOBUF_GZIP_LEVEL = 6
#: Bodies rendered and compressed at once: a render is CPU-bound, so more than the cores buy
#: nothing but memory (each holds a body, up to 70 MB of text at 10,000 partitions).
MAX_RENDERS = 2
#: Seconds a scrape waits for a renderer before it is answered 503 (well under Prometheus'
#: default 10 s scrape timeout).
RENDER_WAIT_S = 2.0
#: The ``Retry-After`` of a 503, in seconds.
RETRY_AFTER_S = 1
#: Paths answered ``OK`` without a render: liveness and readiness probes.
HEALTH_PATHS = frozenset({"/-/healthy", READY_PATH})

#: What a body callable returns: the body, or its parts in order (``core.gzip_parts``).
Body = bytes | Sequence[bytes]


class _Flight:
    """One render that scrapes share: its body once done, and the render after it."""

    __slots__ = ("done", "next", "result", "scrapes")

    def __init__(self) -> None:
        self.done = threading.Event()
        self.result: Body | None = None
        #: the render that the scrapes arriving meanwhile share; its first one renders it
        self.next: _Flight | None = None
        #: the scrapes this render serves
        self.scrapes = 1


class MetricsServer:
    """A running /metrics HTTP server (gzip when the scraper accepts it); ``close()`` stops it.

    With a web config (``--web-config-file``) it serves over TLS and/or behind basic auth.
    ``on_scrape`` hears the address of each authorized scraper before its body is rendered.
    A scraper whose ``Accept`` asks for the delimited protobuf format (``core.promproto``) gets
    the ``protobuf`` body when there is one; ``HEAD`` answers as ``GET`` without rendering.
    """

    def __init__(
        self,
        body: Callable[[], Body],
        host: str,
        port: int,
        web: WebConfig | None = None,
        on_scrape: Callable[[str], None] | None = None,
        content_type: str = "text/plain; version=0.0.4; charset=utf-8",
        protobuf: Callable[[], Body] | None = None,
    ) -> None:
        self._body = body
        #: the delimited protobuf body, for scrapers that ask for it (None: text for everyone)
        self._protobuf = protobuf
        self._web = web
        self._on_scrape = on_scrape
        self._content_type = content_type
        self._tls = web.ssl_context() if web is not None else None
        self._renders = threading.BoundedSemaphore(MAX_RENDERS)
        #: body callable → the render in flight, which later scrapes do not share (``_render``)
        self._flights: dict[Callable[[], Body], _Flight] = {}
        #: content type → the compressor of its bodies (keeps the last one's parts compressed)
        self._gzipped: dict[str, PartsGzip] = {}
        self._lock = threading.Lock()
        #: answered 503 because every renderer stayed busy (tests and logs read it)
        self.busy_answers = 0
        self.host = host
        limits = Limits(
            handshake_s=TLS_HANDSHAKE_TIMEOUT_S,
            read_s=READ_TIMEOUT_S,
            keepalive_idle_s=KEEPALIVE_IDLE_S,
            write_s=WRITE_TIMEOUT_S,
            linger_s=LINGER_S,
            max_connections=MAX_CONNECTIONS,
            evict_min_age_s=EVICT_MIN_AGE_S,
            stalled_write_s=STALLED_WRITE_S,
            turn_s=TURN_S,
        )
        self._loop = Loop(self, host, port, self._tls, limits)
        self.port = self._loop.port

    @property
    def evicted(self) -> int:
        """Connections cut to make room for a new one."""
        return self._loop.evicted

    @property
    def timed_out(self) -> int:
        """Connections cut at their phase's deadline."""
        return self._loop.timed_out

    @property
    def accepted(self) -> int:
        """Connections accepted (a keep-alive scraper's scrapes share one)."""
        return self._loop.accepted

    @property
    def _open(self) -> dict[Conn, None]:
        """The open connections (tests read how many)."""
        return self._loop.open

    # -- what the loop asks (``runtime.webloop.App``) -----------------------------------------

    def peer_allowed(self, sock: ssl.SSLSocket) -> bool:
        """``client_allowed_sans``: whether some SAN of the client's certificate is allowed."""
        return self._web is None or self._web.peer_allowed(sock)

    def inline(self, head: bytes) -> bool:
        """Health is answered in the loop itself: no render, no handler, no credentials (it
        reveals nothing)."""
        line = head.split(b"\n", 1)[0].split()
        return len(line) >= 2 and route(line[1].decode("latin-1")) in HEALTH_PATHS

    def handle(self, addr: Any, head: bytes) -> Outcome:
        """The answer to one request head (in a handler thread, or inline for health)."""
        return exchange(_Handler, head, addr, self)

    # -- render and compress ------------------------------------------------------------------

    def _render(self, render: Callable[[], Body]) -> Body | None:
        """The body (raw), or None when no renderer came free within ``RENDER_WAIT_S``.

        Scrapes that arrive while a body is being rendered share the next render, which starts
        after each of them arrived (so no scrape gets a body older than its request): a burst
        of N scrapes costs two renders, not N, and a scrape's wait no longer grows with the
        clients ahead of it (100 clients scraping in a loop held each scrape ~0.3 s behind
        their renders; docs/configuration.md). The shared body is one object, so it is
        compressed once too."""
        deadline = time.monotonic() + RENDER_WAIT_S
        with self._lock:
            running = self._flights.get(render)
            leader = running is None or running.next is None
            if running is None:
                mine = self._flights[render] = _Flight()
            else:
                if running.next is None:
                    running.next = _Flight()
                mine = running.next
                mine.scrapes += not leader
        if not leader:
            mine.done.wait()  # its leader's waits are bounded, and it always sets ``done``
            return mine.result
        try:
            if running is not None:  # started before this request arrived: the next one
                if not running.done.wait(timeout=max(0.0, deadline - time.monotonic())):
                    return None
                with self._lock:
                    self._flights[render] = mine
            if not self._renders.acquire(timeout=max(0.0, deadline - time.monotonic())):
                return None
            try:
                mine.result = render()
            finally:
                self._renders.release()
        finally:
            with self._lock:
                if self._flights.get(render) is mine:
                    if mine.next is None:
                        del self._flights[render]
                    else:
                        self._flights[render] = mine.next
            mine.done.set()
        return mine.result

    def _gzip(self, data: Body, content_type: str) -> bytes | None:
        """The body gzipped; each format keeps its own compressor (a text scraper and a protobuf
        one do not evict each other's parts), and an unchanged part is not compressed again."""
        packer = self.compressor(content_type)
        if not self._renders.acquire(timeout=RENDER_WAIT_S):
            return None
        try:
            return packer.compress(data)
        finally:
            self._renders.release()

    @property
    def content_type(self) -> str:
        """The content type of the (text) body served to scrapers that do not ask for protobuf."""
        return self._content_type

    def compressor(self, content_type: str) -> PartsGzip:
        """The compressor of ``content_type``'s bodies, the one scrapes use: a body's owner may
        ``prime`` it with parts it knows the next body will hold (the exporter's coarse
        resolutions' chunks, deflated when their windows close rather than at the scrape)."""
        packer = self._gzipped.get(content_type)
        if packer is None:
            level = PROTOBUF_GZIP_LEVEL if content_type == promproto.CONTENT_TYPE else GZIP_LEVEL
            with self._lock:
                packer = self._gzipped.setdefault(content_type, PartsGzip(level))
        return packer

    def close(self) -> None:
        """Stop accepting and cut every open connection, so SIGTERM ends the process at once;
        returns at once unless a handler is inside a render or a password check (then within
        ``runtime.webloop.CLOSE_JOIN_S``)."""
        self._loop.close()

    #: the socketserver spelling (the probe's agent stops its server with it)
    shutdown = close


#: The path of the scrape: any other path but the health ones is answered 404 (node_exporter
#: does the same), so a typo in a scrape config is an error, not a success.
METRICS_PATH = "/metrics"


def route(target: str) -> str | None:
    """The path a request target names, if the server has it (``/metrics`` or a health path);
    None: 404. The query is not part of the path (Prometheus' ``params`` go there), percent
    escapes are decoded and an absolute-form target (``http://host/metrics``) names its path,
    as Go's server reads them."""
    if target.startswith(("http://", "https://")):
        target = urllib.parse.urlsplit(target).path or "/"
    path = urllib.parse.unquote(target.partition("?")[0].partition("#")[0])
    if path.startswith("//"):  # as http.server reads it (no open redirect): one slash
        path = "/" + path.lstrip("/")
    return path if path == METRICS_PATH or path in HEALTH_PATHS else None


class _Handler(Exchange):
    """A request to the server: ``/metrics`` (any query) rendered, health answered, else 404."""

    server: MetricsServer  # type: ignore[assignment]

    def extra_headers(self) -> Iterable[tuple[str, str]]:
        web = self.server._web
        return web.headers.items() if web is not None else ()  # http_server_config.headers

    def do_HEAD(self) -> None:
        self.do_GET()

    def do_GET(self) -> None:
        srv = self.server
        path = route(self.path)
        if path in HEALTH_PATHS:
            self.answer(200, b"OK\n")
            return
        if path is None:
            self.answer(404, b"Not found: the metrics are at /metrics\n")
            return
        if srv._web is not None:
            ok = srv._web.check(self.headers.get("Authorization"))
            if ok is None:
                self._busy()
                return
            if not ok:
                self.answer(401, b"Unauthorized\n", UNAUTHORIZED_HEADERS)
                return
        render, content_type = srv._body, srv._content_type
        if srv._protobuf is not None and promproto.wants_protobuf(self.headers.get("Accept", "")):
            render, content_type = srv._protobuf, promproto.CONTENT_TYPE
        gzipped = accepts_gzip(self.headers.get("Accept-Encoding"))
        if self.command == "HEAD":
            # the headers a GET would get, without rendering or compressing a body (whose
            # length is therefore not sent: a HEAD answer may leave it out, RFC 9110 9.3.2)
            self.send_response(200)
            self.send_header("Content-Type", content_type)
            if gzipped:
                self.send_header("Content-Encoding", "gzip")
            self.end_headers()
            return
        if srv._on_scrape is not None:
            srv._on_scrape(self.client_address[0])
        data = srv._render(render)
        if data is not None and gzipped:
            data = srv._gzip(data, content_type)
        if data is None:
            self._busy()
            return
        parts = (data,) if isinstance(data, bytes) else data
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        if gzipped:
            self.send_header("Content-Encoding", "gzip")
        self.send_header("Content-Length", str(sum(len(p) for p in parts)))
        self.end_headers()
        if self.command != "HEAD":
            for part in parts:
                self.wfile.write(part)

    def _busy(self) -> None:
        self.server.busy_answers += 1
        self.answer(
            503,
            b"Busy: every renderer is taken; retry\n",
            [("Retry-After", str(RETRY_AFTER_S)), ("Content-Type", "text/plain; charset=utf-8")],
        )
