"""The /metrics server's event loop: accept, TLS handshake, read heads, write answers; never wait.

One thread (``nines-metrics``) runs ``selectors`` over non-blocking sockets, TLS handshakes
included (non-blocking ``do_handshake``: OpenSSL's crypto runs without the GIL). A connection
costs a socket, not a thread, so an idle, trickling or half-handshaken client costs a bounded
share and never a scrape. Whom to cut and when is ``runtime.webpolicy``'s; what a head means is
the ``app``'s, answered inline (health) or by a handler thread (``runtime.webhandlers``).
"""

from __future__ import annotations

import collections
import contextlib
import selectors
import socket
import ssl
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

from runtime import webpolicy as policy
from runtime.webhandlers import Handlers, yield_cpu
from runtime.webhttp import MAX_HEAD_BYTES, TOO_LARGE, Outcome, take_head

#: Connections the kernel queues until the loop accepts them (it caps this at
#: ``net.core.somaxconn``, 4,096 on Linux since 5.4): room for a burst of connects; Go's
#: listeners ask for somaxconn too.
LISTEN_BACKLOG = 4096
#: Connections accepted per turn of the loop, so a connect storm cannot starve the reads.
ACCEPT_BATCH = 128
#: Bytes handed to one ``send``.
_SEND_CHUNK = 256 * 1024
#: Seconds between looks for an evictable connection while the cap holds new ones back.
_PAUSE_S = 0.05
#: Longest sleep of the loop with nothing due (``close()`` wakes it at once anyway).
_POLL_S = 1.0


class App(Protocol):
    """What the loop asks of the server it runs for: whether a client's certificate may go on
    (its handshake done), whether a request is answered in the loop itself (cheap: health), and
    the answer to a complete request head (in a handler thread, or inline)."""

    def peer_allowed(self, sock: ssl.SSLSocket) -> bool: ...
    def inline(self, head: bytes) -> bool: ...
    def handle(self, addr: Any, head: bytes) -> Outcome: ...


@dataclass(eq=False, slots=True, kw_only=True)
class Conn(policy.ConnState):
    """One client connection and where it is in its life."""

    sock: socket.socket
    addr: Any
    #: keep it after this response (HTTP/1.1 keep-alive); or drop the rest of a request not
    #: read whole after the response (``policy.LINGER``)
    keep: bool = False
    linger: bool = False
    head: bytearray = field(default_factory=bytearray)
    #: the response still to write: parts, the first one from ``at``
    out: collections.deque[bytes] = field(default_factory=collections.deque)
    at: int = 0


class Loop:
    """A listening socket and the thread that serves it until ``close()``."""

    def __init__(
        self, app: App, host: str, port: int, tls: ssl.SSLContext | None, limits: policy.Limits
    ) -> None:
        self._app = app
        self._tls = tls
        self._limits = limits
        #: every open connection (the loop's alone; others only read its size)
        self.open: dict[Conn, None] = {}
        self._eviction: policy.Eviction[Conn] = policy.Eviction(limits)
        #: kept connections whose next request may be buffered already (pipelined, or in the
        #: TLS layer where the selector cannot see it): stepped on the next turn
        self._again: list[Conn] = []
        self._deadlines: policy.Deadlines[Conn] = policy.Deadlines()
        self._handlers: Handlers[Conn] = Handlers(app.handle, self._wake)
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
        self.port = int(self._listener.getsockname()[1])
        #: connections accepted, cut to make room for a new one, and cut at a phase's deadline
        self.accepted = self.evicted = self.timed_out = 0
        self._thread = threading.Thread(target=self._loop, name="nines-metrics", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        """Accept, handshake, read heads and write responses until ``close()``."""
        yield_cpu()
        try:
            while not self._closing.is_set():
                timeout = self._deadlines.wait_s(time.monotonic(), _POLL_S)
                if not self._accepting:
                    timeout = min(timeout, max(0.0, self._resume_at - time.monotonic()))
                    if time.monotonic() >= self._resume_at:
                        self._resume()
                if self._again:
                    timeout = 0.0
                ready = self._sel.select(timeout)
                turn_end = time.monotonic() + self._limits.turn_s
                for key, _ in ready:
                    if isinstance(key.data, Conn):
                        self._eviction.ready(key.data)
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
                for conn, events in policy.turn_order(steps):
                    self._step(conn, events)
                    self._answer_done()  # a rendered answer goes out between handshakes
                    if time.monotonic() > turn_end:
                        break  # the rest stay ready: the next select reports them again
                self._answer_done()
                for conn in self._deadlines.expired(time.monotonic()):
                    self.timed_out += 1
                    self._close(conn)
        finally:
            for conn in list(self.open):
                with contextlib.suppress(OSError):
                    conn.sock.shutdown(socket.SHUT_RDWR)
                self._close(conn)
            self._sel.close()

    def _answer_done(self) -> None:
        """Start writing the responses the handlers finished."""
        for conn, parts, keep, linger in self._handlers.finished():
            if not conn.closed:
                self._respond(conn, parts, keep, linger)

    def _wake(self) -> None:
        with contextlib.suppress(OSError):  # full: the loop is awake already
            self._wake_w.send(b"\0")

    def _accept(self) -> None:
        """Accept a batch; at the cap, each new connection first evicts the policy's victim."""
        for _ in range(ACCEPT_BATCH):
            full = len(self.open) >= self._limits.max_connections
            victim = self._eviction.victim(time.monotonic()) if full else None
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
            phase = policy.HEAD
            if self._tls is not None:
                try:
                    sock = self._tls.wrap_socket(
                        sock, server_side=True, do_handshake_on_connect=False
                    )
                except (OSError, ValueError):
                    sock.close()
                    continue
                phase = policy.HANDSHAKE
            conn = Conn(sock=sock, addr=addr, phase=phase, born=now, seq=self.accepted)
            conn.deadline = policy.deadline(self._limits, phase, now)
            self.open[conn] = None
            self._eviction.waiting(conn)
            self._deadlines.track(conn)
            self._sel.register(sock, selectors.EVENT_READ, conn)

    def _enter(self, conn: Conn, phase: str, kept_idle: bool = False) -> None:
        """``conn`` moves to ``phase``, under that phase's deadline from now."""
        conn.phase = phase
        conn.deadline = policy.deadline(self._limits, phase, time.monotonic(), kept_idle=kept_idle)
        if conn.deadline != float("inf"):  # a handled one has none: nothing to track
            self._deadlines.track(conn)

    def _close(self, conn: Conn) -> None:
        if conn.closed:
            return
        conn.closed = True
        if conn.phase != policy.HANDLING:
            with contextlib.suppress(KeyError, ValueError, OSError):
                self._sel.unregister(conn.sock)
        self.open.pop(conn, None)
        self._eviction.forget(conn)
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

    def _want(self, conn: Conn, events: int) -> None:
        with contextlib.suppress(KeyError, ValueError):
            if self._sel.get_key(conn.sock).events != events:
                self._sel.modify(conn.sock, events, conn)

    def _step(self, conn: Conn, events: int) -> None:
        """Move one connection on as far as its socket lets it, without waiting."""
        if conn.closed:
            return
        self._eviction.taken(conn)
        try:
            if conn.phase == policy.HANDSHAKE:
                self._handshake(conn)
            if conn.phase == policy.HEAD:
                self._read_head(conn)
            elif conn.phase == policy.WRITING:
                self._write(conn)
            elif conn.phase == policy.LINGER:
                self._linger(conn)
        except (OSError, ValueError):  # resets, TLS errors
            self._close(conn)
        if not conn.closed and conn.phase in (policy.HANDSHAKE, policy.HEAD):
            self._eviction.waiting(conn)

    def _handshake(self, conn: Conn) -> None:
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
        if not self._app.peer_allowed(sock):
            self._close(conn)  # client_allowed_sans: no SAN of its certificate is allowed
            return
        self._enter(conn, policy.HEAD)
        self._want(conn, selectors.EVENT_READ)

    def _read_head(self, conn: Conn) -> None:
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
                self._enter(conn, policy.HEAD)
            conn.head += data
            if self._dispatched(conn):
                return
            if len(conn.head) > MAX_HEAD_BYTES:
                self._respond(conn, [TOO_LARGE], keep=False, linger=True)
                return
            pending = getattr(conn.sock, "pending", None)
            if pending is None or not pending():
                return  # the selector says when more comes

    def _dispatched(self, conn: Conn) -> bool:
        """Whether a complete head was in hand and went on (what follows it stays in ``head``)."""
        head = take_head(conn.head)
        if head is not None:
            self._dispatch(conn, head)
        return head is not None

    def _dispatch(self, conn: Conn, head: bytes) -> None:
        """A complete head: the app's inline ones are answered here, others by a handler."""
        if self._app.inline(head):
            self._respond(conn, *self._app.handle(conn.addr, head))
            return
        with contextlib.suppress(KeyError, ValueError):
            self._sel.unregister(conn.sock)
        self._eviction.forget(conn)  # a request in hand is not evicted
        self._enter(conn, policy.HANDLING)
        self._handlers.submit(conn, conn.addr, head)

    def _respond(
        self, conn: Conn, parts: list[bytes], keep: bool = False, linger: bool = False
    ) -> None:
        """Start writing a response; then wait for the next request (``keep``), or close,
        first reading and dropping what the client still sends (``linger``: a request not read
        whole, whose rest would otherwise reset the connection under the response)."""
        if conn.phase == policy.HANDLING:
            self._sel.register(conn.sock, selectors.EVENT_WRITE, conn)
        conn.keep = keep
        conn.linger = not keep and (linger or bool(conn.head))
        if not keep:
            conn.head = bytearray()
        conn.out.extend(p for p in parts if p)
        conn.at = 0
        conn.progress_at = time.monotonic()
        self._enter(conn, policy.WRITING)
        self._eviction.responding(conn)
        try:
            self._write(conn)
        except (OSError, ValueError):
            self._close(conn)

    def _write(self, conn: Conn) -> None:
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
        self._enter(conn, policy.LINGER)
        self._eviction.lingering(conn)  # the first to evict
        self._want(conn, selectors.EVENT_READ)

    def _keep(self, conn: Conn) -> None:
        """A response written whole on a kept-alive connection: wait for the next request."""
        conn.served += 1
        conn.keep = False
        self._enter(conn, policy.HEAD, kept_idle=not conn.head)
        self._eviction.kept_alive(conn)
        self._want(conn, selectors.EVENT_READ)
        self._again.append(conn)  # a pipelined request may be in hand or in the TLS layer

    def _linger(self, conn: Conn) -> None:
        while True:
            try:
                data = conn.sock.recv(65536)
            except (BlockingIOError, InterruptedError, ssl.SSLWantReadError):
                return
            if not data:
                self._close(conn)
                return

    def close(self) -> None:
        """Stop accepting and cut every open connection; returns at once unless a handler is
        inside a render or a password check (then within ``webhandlers.CLOSE_JOIN_S``)."""
        self._closing.set()
        self._wake()
        self._thread.join(timeout=2 * _POLL_S + 1)  # the loop cuts every connection on its way out
        self._listener.close()  # the kernel resets those still in the backlog
        self._handlers.close()
        for sock in (self._wake_r, self._wake_w):
            sock.close()
