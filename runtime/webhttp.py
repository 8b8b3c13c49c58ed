"""HTTP/1.1 for the /metrics server: a complete request head in, the response's bytes out.

The standard library's ``BaseHTTPRequestHandler`` reads the head from memory (the loop has read
it whole, ``take_head``) and writes into a list of parts the loop sends, so no thread ever waits
on a client. The rules it keeps: a connection is kept after its response unless the client says
``Connection: close``, is HTTP/1.0 without ``Connection: keep-alive``, or announced a body (never
read: the connection closes after the answer); pipelined requests stay in the loop's buffer and
are answered in order; no interim ``100 Continue``.
"""

from __future__ import annotations

import io
from collections.abc import Iterable
from http.server import BaseHTTPRequestHandler
from typing import Any

#: Bytes of a request line and headers (Prometheus sends ~300): a longer head is answered 431.
MAX_HEAD_BYTES = 16 * 1024
#: The answer to a head over ``MAX_HEAD_BYTES``; the connection then closes.
TOO_LARGE = (
    b"HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Type: text/plain; charset=utf-8\r\n"
    b"Content-Length: 24\r\nConnection: close\r\n\r\nRequest head too large\r\n"
)
#: What ``exchange`` returns: the response's parts; whether the connection is kept for another
#: request; whether a body of the request is still to come (dropped before the close).
Outcome = tuple[list[bytes], bool, bool]


def take_head(buffer: bytearray) -> bytes | None:
    """The request head at the start of ``buffer`` (up to its empty line), taken out of it, or
    None while it is incomplete; what follows it (a pipelined request) stays."""
    for mark in (b"\r\n\r\n", b"\n\n"):
        at = buffer.find(mark)
        if at >= 0:
            end = at + len(mark)
            head = bytes(buffer[:end])
            del buffer[:end]
            return head
    return None


class Collect:
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


class Exchange(BaseHTTPRequestHandler):
    """One request, read from its complete head; the response is collected for the loop.

    A subclass answers (``do_GET``...); ``extra_headers`` go on every answer."""

    wfile: Collect  # type: ignore[assignment]
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

    def extra_headers(self) -> Iterable[tuple[str, str]]:
        """Headers sent on every answer, before ``Connection``."""
        return ()

    def send_header(self, keyword: str, value: str) -> None:
        if keyword.lower() == "connection":
            self._said_connection = True
        super().send_header(keyword, value)

    def end_headers(self) -> None:
        for name, value in self.extra_headers():
            self.send_header(name, value)
        if not self._said_connection:
            if self.close_connection:
                self.send_header("Connection", "close")
            elif self.request_version == "HTTP/1.0":
                self.send_header("Connection", "keep-alive")
        super().end_headers()

    def answer(self, code: int, text: bytes, headers: list[tuple[str, str]] | None = None) -> None:
        """A short answer: ``text`` (not sent to a HEAD), plain text unless ``headers`` say."""
        self.send_response(code)
        for name, value in headers or [("Content-Type", "text/plain; charset=utf-8")]:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(text)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(text)

    def log_message(self, *_: Any) -> None:  # scrapes are not log lines
        pass


def exchange(handler: type[Exchange], head: bytes, addr: Any, server: Any) -> Outcome:
    """The response to one complete request head, as ``handler`` answers it for ``server``."""
    out = Collect()
    done = handler((head, out), addr, server)  # type: ignore[arg-type]  # no socketserver
    return out.parts, not done.close_connection, done.has_body


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
