"""The /metrics HTTP server of the probe and the exporter: serves a body callable, gzipped when the
scraper accepts it, and outlives its clients.

Not prometheus_client's ``start_http_server``: that one renders a registry on every scrape in
one thread per client with no timeouts, and does the TLS handshake in its accept loop, so one
client that connects and sends nothing stalls every scrape and the shutdown. Here, as in Go's
``net/http`` with exporter-toolkit:

- the accept loop only accepts; each connection gets a thread of its own, which does the TLS
  handshake within ``TLS_HANDSHAKE_TIMEOUT_S``, must receive the whole request head within
  ``READ_TIMEOUT_S`` (Go's ``ReadHeaderTimeout``: a slowloris that sends a byte a second is cut)
  and write the whole response within ``WRITE_TIMEOUT_S`` (a client that reads slowly is cut);
- at most ``MAX_CONNECTIONS`` connections are served at once; more wait in the listen backlog,
  not refused, until one ends (each ends within the three timeouts);
- at most ``MAX_RENDERS`` bodies are rendered and compressed at once; a scrape that finds them
  busy for ``RENDER_WAIT_S`` is answered ``503`` with ``Retry-After``. Writing happens after a
  render's slot is released, so a slow reader holds a connection, never a renderer;
- the same body (the same ``bytes`` object, or parts: the exporter caches them) is compressed
  once, and a large part that stays the same object from one body to the next is compressed
  once too (``core.gzip_parts``); the body's owner may compress a part ahead of the scrape
  (``compressor``: the exporter does for its coarse resolutions);
- a scraper whose ``Accept`` asks for the delimited protobuf format (``core.promproto``: how
  native histograms reach Prometheus) gets the ``protobuf`` body when the server has one, through
  the same renderers and the same compression cache; any other scraper gets the text format;
- ``close()`` stops accepting and cuts every open connection, so SIGTERM ends the process at once.

``/-/healthy`` and ``/-/ready`` answer ``OK`` without rendering and without credentials (they
reveal nothing), for a cheap readiness probe; every other path is the metrics.
"""

from __future__ import annotations

import contextlib
import io
import selectors
import socket
import threading
import time
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler
from typing import Any

from core import promproto
from core.gzip_parts import PartsGzip
from runtime.webconfig import READY_PATH, UNAUTHORIZED_HEADERS, WebConfig

#: zlib level of gzipped text scrapes. At 10,000 probe partitions the exporter's 67 MB of text
#: are 4.3 MB at level 4 and 4.0 MB at level 6, for half the CPU (0.27 s and 0.54 s, the whole
#: body): level 4 keeps a scrape after the 10 s and 1 m windows closed, which compresses those
#: two resolutions' parts (``core.gzip_parts``), within the 0.5 s budget, its bytes well within
#: 5 MB (bench.cardinality, docs/benchmarks.md).
GZIP_LEVEL = 4
#: zlib level of gzipped protobuf scrapes: 8-byte doubles compress less than their text, and
#: level 6 is what keeps the 61 MB body under 5 MB at 10,000 partitions (4.96 MB; level 5: 5.14).
PROTOBUF_GZIP_LEVEL = 6
#: Seconds a client has to finish its TLS handshake.
TLS_HANDSHAKE_TIMEOUT_S = 5.0
#: Seconds a client has to send its whole request line and headers, however it trickles them.
READ_TIMEOUT_S = 5.0
#: Seconds a client has to read the whole response (a 5 MB gzipped scrape takes well under 1 s
#: on any network Prometheus scrapes over).
WRITE_TIMEOUT_S = 30.0
#: Connections served at once (a thread each); more wait in the listen backlog until one ends.
MAX_CONNECTIONS = 64
#: Connections the kernel queues beyond those (then a client's connect waits or is refused).
LISTEN_BACKLOG = 128
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
#: Seconds ``close()`` waits for the connections' threads to end (a render or a check in flight).
CLOSE_JOIN_S = 5.0
#: Seconds between the accept loop's looks at ``close()``.
_POLL_S = 0.2


#: What a body callable returns: the body, or its parts in order (``core.gzip_parts``).
Body = bytes | Sequence[bytes]


class _DeadlineReader(io.RawIOBase):
    """The socket's bytes, none after ``deadline``: each read waits only for what time is left."""

    def __init__(self, sock: socket.socket, deadline: float) -> None:
        self._sock = sock
        self._deadline = deadline

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("request head not received in time")
        self._sock.settimeout(left)
        return self._sock.recv_into(buffer)


class _DeadlineWriter(io.RawIOBase):
    """Writes the whole of each chunk by ``deadline`` (set when the response starts)."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self.deadline: float | None = None

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        if self.deadline is None:
            self.deadline = time.monotonic() + WRITE_TIMEOUT_S
        view = memoryview(data).cast("B")
        sent = 0
        while sent < len(view):
            left = self.deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("response not read in time")
            self._sock.settimeout(left)
            sent += self._sock.send(view[sent : sent + 256 * 1024])
        return sent


class MetricsServer:
    """A running /metrics HTTP server (gzip when the scraper accepts it); ``close()`` stops it.

    With a web config (``--web-config-file``) it serves over TLS and/or behind basic auth.
    ``on_scrape`` hears the address of each authorized scraper before its body is rendered.
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
        self._slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
        self._renders = threading.BoundedSemaphore(MAX_RENDERS)
        #: content type → the compressor of its bodies (keeps the last one's parts compressed)
        self._gzipped: dict[str, PartsGzip] = {}
        self._open: set[socket.socket] = set()
        #: the connections' threads, so ``close()`` can let them end
        self._workers: set[threading.Thread] = set()
        self._open_lock = threading.Lock()
        self._closing = threading.Event()
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self._listener = socket.socket(family, socket.SOCK_STREAM)
        try:
            self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            self._listener.bind((host, port))
            self._listener.listen(LISTEN_BACKLOG)
        except OSError:
            self._listener.close()
            raise
        self.host = host
        self.port = int(self._listener.getsockname()[1])
        #: answered 503 because every renderer stayed busy (tests and logs read it)
        self.busy_answers = 0
        self._thread = threading.Thread(target=self._accept_loop, name="nines-metrics", daemon=True)
        self._thread.start()

    # -- accepting ----------------------------------------------------------------------------

    def _accept_loop(self) -> None:
        """Accept while a connection slot is free; never touch a client's bytes here."""
        with selectors.DefaultSelector() as sel:
            sel.register(self._listener, selectors.EVENT_READ)
            while not self._closing.is_set():
                if not self._slots.acquire(timeout=_POLL_S):
                    continue  # every slot busy: clients wait in the backlog
                conn = None
                while conn is None and not self._closing.is_set():
                    if sel.select(_POLL_S):
                        with contextlib.suppress(OSError):  # e.g. reset before accept
                            conn, addr = self._listener.accept()
                if conn is None:
                    self._slots.release()
                    break
                with self._open_lock:
                    self._open.add(conn)
                worker = threading.Thread(
                    target=self._connection,
                    args=(conn, addr),
                    name="nines-metrics-conn",
                    daemon=True,
                )
                with self._open_lock:
                    self._workers.add(worker)
                worker.start()

    def _connection(self, conn: socket.socket, addr: Any) -> None:
        """One client: handshake, one request, one response, each within its timeout."""
        sock: socket.socket = conn
        try:
            if self._tls is not None:
                conn.settimeout(TLS_HANDSHAKE_TIMEOUT_S)
                sock = self._tls.wrap_socket(conn, server_side=True, do_handshake_on_connect=False)
                with self._open_lock:
                    self._open.add(sock)
                    if self._closing.is_set():  # close() may have cut ``conn`` but not ``sock``
                        return
                sock.do_handshake()  # the timeout bounds the whole handshake's every read
            _Handler(sock, addr, self)  # type: ignore[arg-type]  # it needs no socketserver
        except (OSError, ValueError):  # timeouts, resets, TLS errors, a socket closed by close()
            pass
        finally:
            with self._open_lock:
                self._open.discard(conn)
                self._open.discard(sock)
                self._workers.discard(threading.current_thread())
            with contextlib.suppress(OSError):
                sock.close()
            with contextlib.suppress(OSError):
                conn.close()
            self._slots.release()

    # -- one request --------------------------------------------------------------------------

    def _render(self, render: Callable[[], Body]) -> Body | None:
        """The body (raw), or None when no renderer came free within ``RENDER_WAIT_S``."""
        if not self._renders.acquire(timeout=RENDER_WAIT_S):
            return None
        try:
            return render()
        finally:
            self._renders.release()

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
            with self._open_lock:
                packer = self._gzipped.setdefault(content_type, PartsGzip(level))
        return packer

    def close(self) -> None:
        """Stop accepting and cut every open connection; returns within about ``_POLL_S``."""
        self._closing.set()
        self._thread.join(timeout=2 * _POLL_S + 1)  # no connection is added after this
        self._listener.close()  # the kernel resets those still in the backlog
        with self._open_lock:
            conns = list(self._open)
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        # Let the cut connections' threads end: one still inside an extension (a bcrypt check)
        # when the interpreter finalizes is ended mid-call, and the process aborts ("FATAL:
        # exception not rethrown", seen once under a flood of wrong passwords at SIGTERM).
        with self._open_lock:
            workers = list(self._workers)
        deadline = time.monotonic() + CLOSE_JOIN_S
        for worker in workers:
            worker.join(timeout=max(0.0, deadline - time.monotonic()))

    #: the socketserver spelling (the probe's agent stops its server with it)
    shutdown = close


class _Handler(BaseHTTPRequestHandler):
    """One request on a connection whose reads and writes have deadlines."""

    server: MetricsServer  # type: ignore[assignment]
    wfile: _DeadlineWriter  # type: ignore[assignment]

    def setup(self) -> None:
        sock = self.request
        self.connection = sock
        reader = _DeadlineReader(sock, time.monotonic() + READ_TIMEOUT_S)
        self.rfile = io.BufferedReader(reader, 8192)  # type: ignore[assignment]
        self.wfile = _DeadlineWriter(sock)

    def finish(self) -> None:
        pass  # nothing buffered: every write went out whole

    def do_GET(self) -> None:
        srv = self.server
        if self.path in HEALTH_PATHS:
            self._answer(200, b"OK\n")
            return
        if srv._web is not None:
            ok = srv._web.check(self.headers.get("Authorization"))
            if ok is None:
                self._busy()
                return
            if not ok:
                self._answer(401, b"Unauthorized\n", UNAUTHORIZED_HEADERS)
                return
        if srv._on_scrape is not None:
            srv._on_scrape(self.client_address[0])
        render, content_type = srv._body, srv._content_type
        if srv._protobuf is not None and promproto.wants_protobuf(self.headers.get("Accept", "")):
            render, content_type = srv._protobuf, promproto.CONTENT_TYPE
        data = srv._render(render)
        gzipped = data is not None and "gzip" in self.headers.get("Accept-Encoding", "")
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
        for part in parts:
            self.wfile.write(part)

    def _busy(self) -> None:
        self.server.busy_answers += 1
        self._answer(
            503,
            b"Busy: every renderer is taken; retry\n",
            [("Retry-After", str(RETRY_AFTER_S)), ("Content-Type", "text/plain; charset=utf-8")],
        )

    def _answer(self, code: int, text: bytes, headers: list[tuple[str, str]] | None = None) -> None:
        self.send_response(code)
        for name, value in headers or [("Content-Type", "text/plain; charset=utf-8")]:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(text)))
        self.end_headers()
        self.wfile.write(text)

    def log_message(self, *_: Any) -> None:  # scrapes are not log lines
        pass
