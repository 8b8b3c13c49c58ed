"""The /metrics HTTP server of the probe and the exporter: serves a body callable, gzipped when the
scraper accepts it, and outlives its clients.

Not prometheus_client's ``start_http_server``: that one renders a registry on every scrape in
one thread per client with no timeouts, and does the TLS handshake in its accept loop, so one
client that connects and sends nothing stalls every scrape and the shutdown. Here:

- one thread (``nines-metrics``) runs an event loop (``selectors``, non-blocking sockets) that
  accepts, does each TLS handshake (non-blocking ``do_handshake``: OpenSSL's crypto runs without
  the GIL), reads each request head and writes each response. A connection costs a socket and a
  few hundred bytes, not a thread, so an idle, trickling or half-handshaken client costs a
  bounded share and never a scrape;
- each phase has a deadline: the handshake ``TLS_HANDSHAKE_TIMEOUT_S``, then the whole request
  head ``READ_TIMEOUT_S`` (Go's ``ReadHeaderTimeout``: a slowloris that sends a byte a second is
  cut), then the whole response ``WRITE_TIMEOUT_S`` (a client that reads slowly is cut);
- HTTP/1.1 keep-alive: a connection is kept after its response unless the client says
  ``Connection: close`` (or is HTTP/1.0 without ``Connection: keep-alive``, or sent a body,
  which is never read), and waits ``KEEPALIVE_IDLE_S`` for its next request, whose head then has
  ``READ_TIMEOUT_S``; pipelined requests are answered in order. Prometheus keeps its scrape
  connection (Go's transport), so its scrapes pay no TLS handshake: a flood of handshakes, a CPU
  attack no scheduling wins (see below), does not reach them. No cap of requests per
  connection: nothing grows with them (the head buffer is reused), and Go's server has none;
- at most ``MAX_CONNECTIONS`` connections are open. At the cap, a new connection evicts the one
  idle longest in its handshake or first head (then the oldest whose bytes wait on the loop,
  then the oldest writer that has taken no byte for ``STALLED_WRITE_S``), never one younger than
  ``EVICT_MIN_AGE_S``, so a new scrape always gets in: a flood from the scraper's own address
  (127.0.0.1) cannot keep it out, which a limit per address could not promise. A kept
  connection (served at least once) goes last, the least recently used first, and only when
  no incomplete one is left to age into eviction: a flood's junk goes before a scraper's
  established connection, however fast the flood reconnects;
- a turn of the loop works at most ``TURN_S``, then accepts; in a turn, reads and writes come
  first, then handshakes under way, then first handshake steps (the RSA), newest and oldest in
  turn;
- a complete request goes to one of ``MAX_HANDLERS`` handler threads (credentials, render,
  compression); ``/-/healthy`` and ``/-/ready`` are answered in the loop itself, without a
  render, a handler or credentials (they reveal nothing);
- at most ``MAX_RENDERS`` bodies are rendered and compressed at once; a scrape that finds them
  busy for ``RENDER_WAIT_S`` is answered ``503`` with ``Retry-After``. The loop writes the
  response, so a slow reader holds a socket, never a renderer or a handler;
- the same body (the same ``bytes`` object, or parts: the exporter caches them) is compressed
  once, and a large part that stays the same object from one body to the next is compressed
  once too (``core.gzip_parts``); the body's owner may compress a part ahead of the scrape
  (``compressor``: the exporter does for its coarse resolutions);
- a scraper whose ``Accept`` asks for the delimited protobuf format (``core.promproto``: how
  native histograms reach Prometheus) gets the ``protobuf`` body when the server has one, through
  the same renderers and the same compression cache; any other scraper gets the text format;
- ``HEAD`` answers as ``GET`` without the body, and without rendering one (so without its
  ``Content-Length``);
- only ``/metrics`` (any query) and the health paths are served; any other path is ``404``;
- gzip only when ``Accept-Encoding`` accepts it (``accepts_gzip``: q-values, whole tokens);
- ``close()`` stops accepting and cuts every open connection, so SIGTERM ends the process at once.

Chosen by measurement (``python tests/metrics_flood.py [--tls DIR --idle 400 --trickle 300
--hello 400]``: 1,100 connections from 127.0.0.1, half idle and half sending a request head a
byte a second, each reopened 0.5 s after it is cut, a scrape every 0.25 s; 2 cores shared with
other sessions' work; docs/architecture.md has the table and the rules' reasons):

- a thread per connection capped at 64 (the server before this one; load 7): 1 scrape answered
  in 10 s, after 14 s; over TLS, with 400 of them stopped mid-handshake, the same;
- a thread per connection with the cap above the flood (1,300, no eviction: deadlines on a pool;
  load 7): every scrape answered (median 1.2 ms, max 141 ms; TLS 4.7 / 539 ms), but 1,106
  threads, and nothing bounds them but the flood's size;
- this loop (load 7-12): every scrape answered, median 5-69 ms, max 512 ms (TLS, 400 of the
  1,100 mid-handshake and reopened after 1 s: median 67-81 ms, max 0.76-1.64 s), 5 threads,
  0.05 of a core (TLS 0.16-0.21). Its limit is the signature: a flood of nothing but fresh
  ClientHellos, faster than the loop signs, is a CPU attack, and a scrape that needs a new
  handshake then loses to it: 1,100 connections that each send a ClientHello, take the signed
  answer, reset and reconnect at once (``--churn 1100``; load 3-7) left 14-24 of 35-43
  fresh-connection scrapes answered (RSA 2048; ECDSA P-256, a quarter of the CPU a handshake:
  26-29 of 43-46); over a kept-alive connection, every one (56-58, median 18-28 ms, max
  66-331 ms), on one connection.
"""

from __future__ import annotations

import collections
import contextlib
import heapq
import io
import logging
import os
import queue
import selectors
import socket
import ssl
import threading
import time
import urllib.parse
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler
from typing import Any

from core import promproto
from core.gzip_parts import PartsGzip
from runtime.webconfig import READY_PATH, UNAUTHORIZED_HEADERS, WebConfig

log = logging.getLogger(__name__)

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
#: Seconds a kept-alive connection (HTTP/1.1) may wait for its next request: above the 5 min
#: Prometheus keeps an idle scrape connection (``prometheus/common``'s default
#: ``idleConnTimeout``), so every connection Prometheus keeps is kept here too, and Prometheus
#: closes first (no scrape sent into a close). A forgotten connection holds a socket 5.5 min at
#: most, and at the cap goes once no incomplete connection is left to evict.
KEEPALIVE_IDLE_S = 330.0
#: Seconds a client has to read the whole response (a 5 MB gzipped scrape takes well under 1 s
#: on any network Prometheus scrapes over).
WRITE_TIMEOUT_S = 30.0
#: Connections open at once; at the cap a new one evicts the oldest incomplete one. 512 fit the
#: common soft open-file limit of 1,024 with room for the process's own (Kafka) sockets, and take
#: a flood 512 connections to push a scrape out before its head is in (on loopback a scrape's
#: head follows its connect by well under a millisecond; its TLS handshake, a few).
MAX_CONNECTIONS = 512
#: Seconds a connection is safe from eviction: a burst of connects larger than the cap waits in
#: the kernel's backlog (where it costs nothing) instead of evicting connections just accepted,
#: a scrape's among them, before their first bytes were read; and eviction, so the churn of a
#: flood that reconnects, is bounded at ``MAX_CONNECTIONS / EVICT_MIN_AGE_S`` a second.
EVICT_MIN_AGE_S = 0.25
#: Seconds without a byte taken before a connection being written to counts as idle (evictable).
STALLED_WRITE_S = 1.0
#: Bytes of a request line and headers (Prometheus sends ~300): a longer head is answered 431.
MAX_HEAD_BYTES = 16 * 1024
#: Seconds the rest of a refused head is read and dropped after the 431, so that the client
#: reads the answer rather than a reset (Go waits 0.5 s for the same reason).
LINGER_S = 1.0
#: Connections the kernel queues until the loop accepts them (it caps this at
#: ``net.core.somaxconn``, 4,096 on Linux since 5.4): room for a burst of connects; Go's
#: listeners ask for somaxconn too.
LISTEN_BACKLOG = 4096
#: Connections accepted per turn of the loop, so a connect storm cannot starve the reads.
ACCEPT_BATCH = 128
#: Seconds of handshakes, reads and writes per turn of the loop before it accepts and reads
#: again: a flood of ClientHellos costs ~1 ms of RSA each, and a turn through 400 of them left
#: the listen backlog to overflow (a dropped SYN costs a scrape 1 s, then 3 s). A kept
#: connection's request waits for the next turn: under a churn flood of 1,100 a kept scrape's
#: median was 20 ms here and 11 ms at 0.01 (load 5-6), but at 0.01 scrapes on new connections
#: were reset more often under the mixed TLS flood (7 of 156 against 1 of 109): not taken.
TURN_S = 0.02
#: Threads that handle complete requests (credentials, render, compression), started as needed.
MAX_HANDLERS = 8
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
#: Niceness added to the server's threads, so that on a busy core the probe's sender, not a
#: flood's handshakes, runs first: a TLS flood doubled the probe's CPU, and its send lag's p99.9
#: went from 5 to 22 ms (load 7, 2 cores). Not 10: that starved the server behind other
#: processes' work (a scrape took 2.1 s at load 13); in a container the niceness only ranks the
#: process's own threads.
NICE = 5
#: Seconds ``close()`` waits for the handler threads to end (a render or a check in flight).
CLOSE_JOIN_S = 5.0
#: Bytes handed to one ``send``.
_SEND_CHUNK = 256 * 1024
#: Seconds between looks for an evictable connection while the cap holds new ones back.
_PAUSE_S = 0.05
#: Longest sleep of the loop with nothing due (``close()`` wakes it at once anyway).
_POLL_S = 1.0

#: What a body callable returns: the body, or its parts in order (``core.gzip_parts``).
Body = bytes | Sequence[bytes]

_HANDSHAKE, _HEAD, _HANDLING, _WRITING = "handshake", "head", "handling", "writing"
#: after a response to a request not read whole: reads and drops the rest until the client
#: closes, so that closing does not reset the connection before the client has the response
_LINGER = "linger"
_TOO_LARGE = (
    b"HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Type: text/plain; charset=utf-8\r\n"
    b"Content-Length: 24\r\nConnection: close\r\n\r\nRequest head too large\r\n"
)


class _Conn:
    """One client connection and where it is in its life."""

    __slots__ = (
        "addr",
        "at",
        "born",
        "closed",
        "deadline",
        "head",
        "keep",
        "linger",
        "out",
        "phase",
        "progress_at",
        "seq",
        "served",
        "sock",
        "tries",
    )

    def __init__(
        self, sock: socket.socket, addr: Any, phase: str, deadline: float, seq: int
    ) -> None:
        #: the order of accepting: a later connection has a larger one
        self.seq = seq
        self.born = time.monotonic()
        #: handshake steps so far: the first one does the RSA (a ClientHello read whole)
        self.tries = 0
        #: its request was not read whole: drop the rest after the response (``_LINGER``)
        self.linger = False
        #: keep the connection after this response (HTTP/1.1 keep-alive)
        self.keep = False
        #: responses written whole on it: a served one waits for its next request as kept
        self.served = 0
        self.sock = sock
        self.addr = addr
        self.phase = phase
        self.deadline = deadline
        self.head = bytearray()
        #: the response still to write: parts, the first one from ``at``
        self.out: collections.deque[bytes] = collections.deque()
        self.at = 0
        self.progress_at = 0.0
        self.closed = False


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


class _Collect:
    """A handler's ``wfile``: keeps the response's bytes objects as they are (no copy)."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def write(self, data: Any) -> int:
        chunk = data if isinstance(data, bytes) else bytes(data)
        if chunk:
            self.parts.append(chunk)
        return len(chunk)

    def flush(self) -> None:
        pass


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
        self._renders = threading.BoundedSemaphore(MAX_RENDERS)
        #: body callable → the render in flight, which later scrapes do not share (``_render``)
        self._flights: dict[Callable[[], Body], _Flight] = {}
        self._max_connections = MAX_CONNECTIONS
        #: content type → the compressor of its bodies (keeps the last one's parts compressed)
        self._gzipped: dict[str, PartsGzip] = {}
        self._lock = threading.Lock()
        #: every open connection (the loop's alone; others only read its size)
        self._open: dict[_Conn, None] = {}
        #: connections in their handshake or head that wait on their client, the one idle the
        #: longest first: the first to evict
        self._idle: collections.OrderedDict[_Conn, None] = collections.OrderedDict()
        #: connections in their handshake or head whose bytes wait on the loop (a queue of
        #: ClientHellos, ~1 ms of RSA each): a scrape among them is not evicted for the
        #: loop's delay while an idle one remains
        self._pending: collections.OrderedDict[_Conn, None] = collections.OrderedDict()
        #: connections being written to, oldest first
        self._writing: collections.OrderedDict[_Conn, None] = collections.OrderedDict()
        #: kept-alive connections (served at least once) waiting for or reading their next
        #: request, the least recently active first: evicted only after every incomplete one
        #: and every stalled writer, so a flood cannot push a scraper's connection out first
        self._kept: collections.OrderedDict[_Conn, None] = collections.OrderedDict()
        #: kept connections whose next request may be buffered already (pipelined, or in the
        #: TLS layer where the selector cannot see it): stepped on the next turn
        self._again: list[_Conn] = []
        #: (deadline, n, connection): the loop cuts each at its deadline
        self._deadlines: list[tuple[float, int, _Conn]] = []
        self._n = 0
        #: responses the handlers finished, for the loop to write
        self._done: collections.deque[tuple[_Conn, list[bytes], bool, bool]] = collections.deque()
        self._requests: queue.SimpleQueue[tuple[_Conn, bytes] | None] = queue.SimpleQueue()
        self._handlers: list[threading.Thread] = []
        self._idle_handlers = 0
        self._closing = threading.Event()
        self._accepting = True
        self._resume_at = 0.0
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self._listener = socket.socket(family, socket.SOCK_STREAM)
        try:
            self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            self._listener.bind((host, port))
            self._listener.listen(LISTEN_BACKLOG)
            self._listener.setblocking(False)
        except OSError:
            self._listener.close()
            raise
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._sel = selectors.DefaultSelector()
        self._sel.register(self._listener, selectors.EVENT_READ, "listener")
        self._sel.register(self._wake_r, selectors.EVENT_READ, "wake")
        self.host = host
        self.port = int(self._listener.getsockname()[1])
        #: answered 503 because every renderer stayed busy (tests and logs read it)
        self.busy_answers = 0
        #: connections cut to make room for a new one, and cut at a phase's deadline
        self.evicted = 0
        self.timed_out = 0
        #: connections accepted (a keep-alive scraper's scrapes share one)
        self.accepted = 0
        self._thread = threading.Thread(target=self._loop, name="nines-metrics", daemon=True)
        self._thread.start()

    # -- the loop -----------------------------------------------------------------------------

    def _loop(self) -> None:
        """Accept, handshake, read heads and write responses until ``close()``."""
        _yield_cpu()
        try:
            while not self._closing.is_set():
                timeout = _POLL_S
                if self._deadlines:
                    timeout = min(timeout, max(0.0, self._deadlines[0][0] - time.monotonic()))
                if not self._accepting:
                    timeout = min(timeout, max(0.0, self._resume_at - time.monotonic()))
                    if time.monotonic() >= self._resume_at:
                        self._resume()
                if self._again:
                    timeout = 0.0
                ready = self._sel.select(timeout)
                turn_end = time.monotonic() + TURN_S
                for key, _ in ready:
                    conn = key.data
                    incomplete = isinstance(conn, _Conn) and not conn.served
                    if incomplete and conn.phase in (_HANDSHAKE, _HEAD):
                        self._idle.pop(conn, None)
                        self._pending[conn] = None  # a deferred one keeps its place
                if self._accepting:
                    self._accept()  # each turn, however busy: a full backlog drops SYNs (1 s)
                steps = []
                for key, events in ready:
                    if key.data == "wake":
                        with contextlib.suppress(OSError):
                            while self._wake_r.recv(4096):
                                pass
                    elif key.data != "listener":
                        steps.append((key.data, events))
                again, self._again = self._again, []
                steps += [(conn, selectors.EVENT_READ) for conn in again]
                # First handshake steps last, newest and oldest in turn: under a flood of
                # ClientHellos (~1 ms of RSA each) the newest, a scrape's among them, is served
                # within the turn and its next steps come before any other RSA (first come,
                # first served spent it on connections evicted right after, and a scrape
                # waited behind them all), and none starves until evicted.
                steps = _both_ends(sorted(steps, key=_priority))
                for conn, events in steps:
                    self._step(conn, events)
                    self._answer_done()  # a rendered answer goes out between handshakes
                    if time.monotonic() > turn_end:
                        break  # the rest stay ready: the next select reports them again
                self._answer_done()
                self._expire()
        finally:
            for conn in list(self._open):
                with contextlib.suppress(OSError):
                    conn.sock.shutdown(socket.SHUT_RDWR)
                self._close(conn)
            self._sel.close()

    def _answer_done(self) -> None:
        """Start writing the responses the handlers finished."""
        while self._done:
            conn, parts, keep, linger = self._done.popleft()
            if not conn.closed:
                self._respond(conn, parts, keep, linger)

    def _wake(self) -> None:
        with contextlib.suppress(OSError):  # full: the loop is awake already
            self._wake_w.send(b"\0")

    def _accept(self) -> None:
        """Accept a batch; at the cap, each new connection first evicts the oldest idle one."""
        for _ in range(ACCEPT_BATCH):
            full = len(self._open) >= self._max_connections
            victim = self._victim() if full else None
            if full and victim is None:
                self._sel.unregister(self._listener)  # new ones wait in the backlog
                self._accepting = False
                self._resume_at = time.monotonic() + _PAUSE_S  # one may be evictable by then
                return
            try:
                sock, addr = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:  # e.g. reset before accept, or out of file descriptors
                return
            self.accepted += 1
            if victim is not None:
                self.evicted += 1
                self._close(victim)
            sock.setblocking(False)
            # A response is written in parts (head, body parts): with Nagle's algorithm on, a
            # part after the first waits for the client's delayed ACK (40 ms on Linux) on every
            # kept-alive scrape. Go's server sets TCP_NODELAY on every connection too.
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            now = time.monotonic()
            if self._tls is not None:
                try:
                    sock = self._tls.wrap_socket(
                        sock, server_side=True, do_handshake_on_connect=False
                    )
                except (OSError, ValueError):
                    sock.close()
                    continue
                conn = _Conn(sock, addr, _HANDSHAKE, now + TLS_HANDSHAKE_TIMEOUT_S, self._n)
            else:
                conn = _Conn(sock, addr, _HEAD, now + READ_TIMEOUT_S, self._n)
            self._open[conn] = None
            self._idle[conn] = None
            self._track(conn)
            self._sel.register(sock, selectors.EVENT_READ, conn)

    def _victim(self) -> _Conn | None:
        """The connection to cut for a new one: the one idle longest in its handshake or first
        head, else the oldest whose bytes wait on the loop, else the oldest stalled writer, else
        the kept-alive one idle longest, and that one only when no incomplete one is left to
        wait for: a flood's junk goes before a scraper's established connection, however fast
        the flood reconnects."""
        now = time.monotonic()
        born_by = now - EVICT_MIN_AGE_S
        for incomplete in (self._idle, self._pending):  # at most the cap: ~30 µs
            for conn in incomplete:
                if conn.born <= born_by:
                    return conn
        stalled = now - STALLED_WRITE_S
        writer = next((c for c in self._writing if c.progress_at <= stalled), None)
        if writer is not None or self._idle or self._pending:
            return writer  # None: an incomplete one ages into eviction soon; wait for it
        return next(iter(self._kept), None)

    def _track(self, conn: _Conn) -> None:
        self._n += 1
        heapq.heappush(self._deadlines, (conn.deadline, self._n, conn))

    def _expire(self) -> None:
        """Cut every connection past its phase's deadline."""
        now = time.monotonic()
        while self._deadlines and self._deadlines[0][0] <= now:
            deadline, _, conn = heapq.heappop(self._deadlines)
            if not conn.closed and conn.deadline == deadline:
                self.timed_out += 1
                self._close(conn)

    def _close(self, conn: _Conn) -> None:
        if conn.closed:
            return
        conn.closed = True
        if conn.phase != _HANDLING:
            with contextlib.suppress(KeyError, ValueError, OSError):
                self._sel.unregister(conn.sock)
        self._open.pop(conn, None)
        self._idle.pop(conn, None)
        self._pending.pop(conn, None)
        self._writing.pop(conn, None)
        self._kept.pop(conn, None)
        conn.out.clear()
        conn.head = bytearray()
        with contextlib.suppress(OSError):
            conn.sock.close()
        self._resume()

    def _resume(self) -> None:
        """Accept again (after a pause at the cap with nothing evictable)."""
        if not self._accepting and not self._closing.is_set():
            self._accepting = True
            self._sel.register(self._listener, selectors.EVENT_READ, "listener")

    def _want(self, conn: _Conn, events: int) -> None:
        with contextlib.suppress(KeyError, ValueError):
            if self._sel.get_key(conn.sock).events != events:
                self._sel.modify(conn.sock, events, conn)

    def _step(self, conn: _Conn, events: int) -> None:
        """Move one connection on as far as its socket lets it, without waiting."""
        if conn.closed:
            return
        self._pending.pop(conn, None)
        try:
            if conn.phase == _HANDSHAKE:
                self._handshake(conn)
            if conn.phase == _HEAD:
                self._read_head(conn)
            elif conn.phase == _WRITING:
                self._write(conn)
            elif conn.phase == _LINGER:
                self._linger(conn)
        except (OSError, ValueError):  # resets, TLS errors
            self._close(conn)
        if not conn.closed and conn.phase in (_HANDSHAKE, _HEAD):
            waiting = self._kept if conn.served else self._idle
            waiting.pop(conn, None)
            waiting[conn] = None  # waits on its client again: the most recently active

    def _handshake(self, conn: _Conn) -> None:
        sock: ssl.SSLSocket = conn.sock  # type: ignore[assignment]
        conn.tries += 1
        try:
            sock.do_handshake()
        except ssl.SSLWantReadError:
            self._want(conn, selectors.EVENT_READ)
            return
        except ssl.SSLWantWriteError:
            self._want(conn, selectors.EVENT_WRITE)
            return
        if self._web is not None and not self._web.peer_allowed(sock):
            self._close(conn)  # client_allowed_sans: no SAN of its certificate is allowed
            return
        conn.phase = _HEAD
        conn.deadline = time.monotonic() + READ_TIMEOUT_S
        self._track(conn)
        self._want(conn, selectors.EVENT_READ)

    def _read_head(self, conn: _Conn) -> None:
        if self._dispatched(conn):  # a pipelined request, read with the one before
            return
        while True:
            try:
                data = conn.sock.recv(MAX_HEAD_BYTES + 1 - len(conn.head))
            except (BlockingIOError, InterruptedError, ssl.SSLWantReadError):
                self._want(conn, selectors.EVENT_READ)
                return
            except ssl.SSLWantWriteError:
                self._want(conn, selectors.EVENT_WRITE)
                return
            if not data:  # the client gave up
                self._close(conn)
                return
            if conn.served and not conn.head:  # a kept one's next request: the head deadline
                conn.deadline = time.monotonic() + READ_TIMEOUT_S
                self._track(conn)
            conn.head += data
            if self._dispatched(conn):
                return
            if len(conn.head) > MAX_HEAD_BYTES:
                self._respond(conn, [_TOO_LARGE], keep=False, linger=True)
                return
            pending = getattr(conn.sock, "pending", None)
            if pending is None or not pending():
                return  # the selector says when more comes

    def _dispatched(self, conn: _Conn) -> bool:
        """Whether a complete head was in hand and went on (what follows it stays in ``head``)."""
        end = _head_end(conn.head)
        if not end:
            return False
        head = bytes(conn.head[:end])
        del conn.head[:end]
        self._dispatch(conn, head)
        return True

    def _dispatch(self, conn: _Conn, head: bytes) -> None:
        """A complete head: health is answered here, anything else by a handler thread."""
        line = head.split(b"\n", 1)[0].split()
        if len(line) >= 2 and route(line[1].decode("latin-1")) in HEALTH_PATHS:
            self._respond(conn, *self._handle(conn, head))
            return
        with contextlib.suppress(KeyError, ValueError):
            self._sel.unregister(conn.sock)
        self._idle.pop(conn, None)
        self._kept.pop(conn, None)  # a request in hand is not evicted
        conn.phase = _HANDLING
        conn.deadline = float("inf")
        self._requests.put((conn, head))
        with self._lock:  # a thread more while requests outnumber the idle ones, up to the cap
            start = (
                self._requests.qsize() > self._idle_handlers and len(self._handlers) < MAX_HANDLERS
            )
            if start:
                self._idle_handlers += 1
        if start:
            worker = threading.Thread(target=self._work, name="nines-metrics-handler", daemon=True)
            self._handlers.append(worker)
            worker.start()

    def _respond(
        self, conn: _Conn, parts: list[bytes], keep: bool = False, linger: bool = False
    ) -> None:
        """Start writing a response; then wait for the next request (``keep``), or close,
        first reading and dropping what the client still sends (``linger``: a request not read
        whole, whose rest would otherwise reset the connection under the response)."""
        if conn.phase == _HANDLING:
            self._sel.register(conn.sock, selectors.EVENT_WRITE, conn)
        now = time.monotonic()
        self._idle.pop(conn, None)
        self._pending.pop(conn, None)
        self._kept.pop(conn, None)
        conn.keep = keep
        conn.linger = not keep and (linger or bool(conn.head))
        conn.phase = _WRITING
        if not keep:
            conn.head = bytearray()
        conn.out.extend(p for p in parts if p)
        conn.at = 0
        conn.progress_at = now
        conn.deadline = now + WRITE_TIMEOUT_S
        self._track(conn)
        self._writing[conn] = None
        try:
            self._write(conn)
        except (OSError, ValueError):
            self._close(conn)

    def _write(self, conn: _Conn) -> None:
        while conn.out:
            part = conn.out[0]
            chunk = memoryview(part)[conn.at : conn.at + _SEND_CHUNK]
            try:
                sent = conn.sock.send(chunk)
            except (BlockingIOError, InterruptedError, ssl.SSLWantWriteError):
                self._want(conn, selectors.EVENT_WRITE)
                return
            except ssl.SSLWantReadError:
                self._want(conn, selectors.EVENT_READ)
                return
            conn.progress_at = time.monotonic()
            conn.at += sent
            if conn.at >= len(part):
                conn.out.popleft()
                conn.at = 0
        if conn.keep:
            self._keep(conn)
            return
        if not conn.linger:
            self._close(conn)  # all written; the kernel sends the rest
            return
        conn.sock.shutdown(socket.SHUT_WR)  # the response ends; then drop what the client sends
        self._writing.pop(conn, None)
        conn.phase = _LINGER
        conn.deadline = time.monotonic() + LINGER_S
        self._track(conn)
        self._idle[conn] = None  # the first to evict
        self._want(conn, selectors.EVENT_READ)

    def _keep(self, conn: _Conn) -> None:
        """A response written whole on a kept-alive connection: wait for the next request."""
        self._writing.pop(conn, None)
        conn.served += 1
        conn.keep = False
        conn.phase = _HEAD
        conn.deadline = time.monotonic() + (READ_TIMEOUT_S if conn.head else KEEPALIVE_IDLE_S)
        self._track(conn)
        self._kept[conn] = None
        self._want(conn, selectors.EVENT_READ)
        self._again.append(conn)  # a pipelined request may be in hand or in the TLS layer

    def _linger(self, conn: _Conn) -> None:
        while True:
            try:
                data = conn.sock.recv(65536)
            except (BlockingIOError, InterruptedError, ssl.SSLWantReadError):
                return
            if not data:
                self._close(conn)
                return

    # -- handlers -----------------------------------------------------------------------------

    def _work(self) -> None:
        """A handler thread: complete requests in, responses out to the loop."""
        _yield_cpu()
        while True:
            item = self._requests.get()
            with self._lock:
                self._idle_handlers -= 1
            if item is None:
                return
            conn, head = item
            parts: list[bytes] = []
            keep, linger = False, False
            try:
                parts, keep, linger = self._handle(conn, head)
            except Exception:
                log.exception("/metrics: a request failed")
            finally:
                with self._lock:
                    self._idle_handlers += 1
            self._done.append((conn, parts, keep, linger))
            self._wake()

    def _handle(self, conn: _Conn, head: bytes) -> tuple[list[bytes], bool, bool]:
        """The response to one request head, as the parts to write; whether the connection is
        kept for another request; whether a body of the request is still to come (dropped)."""
        out = _Collect()
        handler = _Handler((head, out), conn.addr, self)  # type: ignore[arg-type]  # no socketserver
        return out.parts, not handler.close_connection, handler.has_body

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
        """Stop accepting and cut every open connection; returns at once unless a handler is
        inside a render or a password check (then within ``CLOSE_JOIN_S``)."""
        self._closing.set()
        self._wake()
        self._thread.join(timeout=2 * _POLL_S + 1)  # the loop cuts every connection on its way out
        self._listener.close()  # the kernel resets those still in the backlog
        for _ in self._handlers:
            self._requests.put(None)
        # Let the handler threads end: one still inside an extension (a bcrypt check) when the
        # interpreter finalizes is ended mid-call, and the process aborts ("FATAL: exception
        # not rethrown", seen once under a flood of wrong passwords at SIGTERM).
        deadline = time.monotonic() + CLOSE_JOIN_S
        for worker in list(self._handlers):
            worker.join(timeout=max(0.0, deadline - time.monotonic()))
        for sock in (self._wake_r, self._wake_w):
            sock.close()

    #: the socketserver spelling (the probe's agent stops its server with it)
    shutdown = close


def _yield_cpu() -> None:
    """This thread's niceness: the process's (its main thread's) plus ``NICE`` (Linux: a thread
    is a task; one started by a niced thread inherits its niceness, so the base is the main's)."""
    with contextlib.suppress(OSError, AttributeError):
        base = os.getpriority(os.PRIO_PROCESS, os.getpid())
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), min(19, base + NICE))


def _priority(step: tuple[_Conn, int]) -> tuple[int, int]:
    """The order of a turn's steps: reads and writes, then handshakes under way, then first
    handshake steps, the newest first."""
    conn = step[0]
    if conn.phase != _HANDSHAKE:
        return (0, 0)
    return (1, 0) if conn.tries else (2, -conn.seq)


def _both_ends(steps: list[tuple[_Conn, int]]) -> list[tuple[_Conn, int]]:
    """The first handshake steps (sorted newest first, at the end) taken from both ends in
    turn: the newest is served at once, and the oldest still gets served before eviction would
    take it (newest first alone starved a scrape's ClientHello for 2-3 s, then evicted it)."""
    first = next((i for i, (c, _) in enumerate(steps) if _priority((c, 0))[0] == 2), len(steps))
    tail = steps[first:]
    newest, oldest = tail[: (len(tail) + 1) // 2], tail[(len(tail) + 1) // 2 :][::-1]
    mixed = [step for pair in zip(newest, oldest, strict=False) for step in pair]
    if len(newest) > len(oldest):
        mixed.append(newest[-1])
    return steps[:first] + mixed


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


def accepts_gzip(header: str | None) -> bool:
    """Whether an ``Accept-Encoding`` header accepts gzip: ``gzip`` or ``x-gzip`` with a
    q-value above 0, else ``*`` with one; a coding is a whole token, never a substring
    (``nogzip`` is not gzip), and a malformed q-value accepts nothing (RFC 9110, 12.5.3)."""
    named: float | None = None
    star: float | None = None
    for element in (header or "").split(","):
        coding, *params = (part.strip() for part in element.split(";"))
        q = 1.0
        for param in params:
            name, _, value = param.partition("=")
            if name.strip().lower() == "q":
                try:
                    q = float(value.strip())
                except ValueError:
                    q = 0.0
                if not 0.0 <= q <= 1.0:
                    q = 0.0
        coding = coding.lower()
        if coding in ("gzip", "x-gzip"):
            named = max(named if named is not None else 0.0, q)
        elif coding == "*":
            star = max(star if star is not None else 0.0, q)
    if named is not None:
        return named > 0
    return star is not None and star > 0


def _head_end(head: bytearray) -> int:
    """Where a request head ends (after its empty line), or 0 while it has not."""
    for mark in (b"\r\n\r\n", b"\n\n"):
        at = head.find(mark)
        if at >= 0:
            return at + len(mark)
    return 0


class _Handler(BaseHTTPRequestHandler):
    """One request, read from its complete head; the response is collected for the loop."""

    server: MetricsServer  # type: ignore[assignment]
    wfile: _Collect  # type: ignore[assignment]
    #: HTTP/1.1: a connection is kept unless the client says ``Connection: close`` (or is
    #: HTTP/1.0 without ``Connection: keep-alive``); ``parse_request`` decides
    protocol_version = "HTTP/1.1"
    #: the request announced a body: it is not read, so the connection is not kept
    has_body = False
    #: a ``Connection`` header went out already (``send_error`` sends its own)
    _said_connection = False

    def setup(self) -> None:
        head, out = self.request
        self.rfile = io.BytesIO(head)
        self.wfile = out

    def handle(self) -> None:
        self.handle_one_request()  # one head; the loop reads the next one

    def finish(self) -> None:
        pass  # nothing buffered: every write was collected

    def parse_request(self) -> bool:
        ok = super().parse_request()
        if ok:
            length = self.headers.get("Content-Length", "0").strip()
            self.has_body = "Transfer-Encoding" in self.headers or length not in ("", "0")
            if self.has_body:
                self.close_connection = True
        return ok

    def handle_expect_100(self) -> bool:
        return True  # no interim 100: the body is never read, the answer comes at once

    def send_header(self, keyword: str, value: str) -> None:
        if keyword.lower() == "connection":
            self._said_connection = True
        super().send_header(keyword, value)

    def end_headers(self) -> None:
        web = self.server._web
        for name, value in web.headers.items() if web is not None else ():
            self.send_header(name, value)  # http_server_config.headers, on every answer
        if not self._said_connection:
            if self.close_connection:
                self.send_header("Connection", "close")
            elif self.request_version == "HTTP/1.0":
                self.send_header("Connection", "keep-alive")
        super().end_headers()

    def do_HEAD(self) -> None:
        self.do_GET()

    def do_GET(self) -> None:
        srv = self.server
        path = route(self.path)
        if path in HEALTH_PATHS:
            self._answer(200, b"OK\n")
            return
        if path is None:
            self._answer(404, b"Not found: the metrics are at /metrics\n")
            return
        if srv._web is not None:
            ok = srv._web.check(self.headers.get("Authorization"))
            if ok is None:
                self._busy()
                return
            if not ok:
                self._answer(401, b"Unauthorized\n", UNAUTHORIZED_HEADERS)
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
        if self.command != "HEAD":
            self.wfile.write(text)

    def log_message(self, *_: Any) -> None:  # scrapes are not log lines
        pass
