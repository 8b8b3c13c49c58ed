"""The /metrics server's bounds, one at a time on real loopback sockets: ``HEAD`` answers as
``GET`` without the body or a render; at the connection cap a new connection evicts the one
idle longest, never one whose request is being served, nor one younger than
``EVICT_MIN_AGE_S``; a head past ``MAX_HEAD_BYTES`` is answered 431."""

from __future__ import annotations

import http.client
import socket
import ssl
import threading
import time
from pathlib import Path

import bcrypt
import pytest
from tls_material import make_tls

import runtime.webserver as ws
from runtime.webconfig import load_web_config

BODY = b"# HELP x x\n# TYPE x gauge\nx 1\n"
PASSWORD = "scrape-pass-42"


def raw(port: int, request: bytes, timeout_s: float = 5) -> bytes:
    """Every byte the server sends back to ``request`` until it closes."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout_s) as sock:
        sock.sendall(request)
        out = b""
        while chunk := sock.recv(65536):
            out += chunk
    return out


def head_and_get(conn: http.client.HTTPConnection, path: str, headers: dict[str, str]) -> tuple:  # type: ignore[type-arg]
    conn.request("HEAD", path, headers=headers)
    head = conn.getresponse()
    head_body = head.read()
    conn.close()
    conn.request("GET", path, headers=headers)
    got = conn.getresponse()
    return head.status, dict(head.headers), head_body, got.status, dict(got.headers), got.read()


@pytest.mark.parametrize("path", ["/metrics", "/-/healthy", "/-/ready"])
def test_head_answers_as_get_without_the_body(path: str, servers: list[ws.MetricsServer]) -> None:
    """HEAD gets GET's status and headers, without a body, and /metrics without a render (so
    without the length of a body it never made)."""
    renders: list[int] = []
    server = ws.MetricsServer(lambda: renders.append(1) or BODY, "127.0.0.1", 0)
    servers.append(server)
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
    for encoding in ("gzip", "identity"):
        head = {"Accept-Encoding": encoding}
        status, headers, body, get_status, get_headers, get_body = head_and_get(conn, path, head)
        assert status == get_status == 200
        assert body == b"" and len(get_body) > 0
        assert headers["Content-Type"] == get_headers["Content-Type"]
        assert headers.get("Content-Encoding") == get_headers.get("Content-Encoding")
        if path == "/metrics":
            assert "Content-Length" not in headers
        else:
            assert headers["Content-Length"] == get_headers["Content-Length"] == "3"
    assert len(renders) == (2 if path == "/metrics" else 0)  # the GETs' renders only
    # on the wire: the head ends the response, and the connection closes
    assert raw(server.port, f"HEAD {path} HTTP/1.0\r\n\r\n".encode()).endswith(b"\r\n\r\n")


def test_head_behind_tls_and_basic_auth(tmp_path: Path, servers: list[ws.MetricsServer]) -> None:
    tls = make_tls(tmp_path / "tls")
    hashed = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(rounds=4)).decode()
    (tmp_path / "web.yml").write_text(
        f"tls_server_config:\n  cert_file: {tls.cert}\n  key_file: {tls.key}\n"
        f"basic_auth_users:\n  prometheus: '{hashed}'\n"
    )
    renders: list[int] = []
    web = load_web_config(tmp_path / "web.yml")
    server = ws.MetricsServer(lambda: renders.append(1) or BODY, "127.0.0.1", 0, web)
    servers.append(server)
    ctx = ssl.create_default_context(cafile=str(tls.ca))
    conn = http.client.HTTPSConnection("127.0.0.1", server.port, timeout=5, context=ctx)
    status, headers, body, *_ = head_and_get(conn, "/metrics", {})
    assert (status, body) == (401, b"") and "WWW-Authenticate" in headers
    assert renders == [] and head_and_get(conn, "/-/healthy", {})[:3:2] == (200, b"")
    import base64

    token = base64.b64encode(f"prometheus:{PASSWORD}".encode()).decode()
    status, headers, body, *_ = head_and_get(conn, "/metrics", {"Authorization": f"Basic {token}"})
    assert (status, body, "Content-Length" in headers) == (200, b"", False)
    assert renders == [1]  # the GET only: a HEAD renders nothing, authorized or not


def test_other_methods_are_still_refused(servers: list[ws.MetricsServer]) -> None:
    server = ws.MetricsServer(lambda: BODY, "127.0.0.1", 0)
    servers.append(server)
    assert raw(server.port, b"POST /metrics HTTP/1.0\r\n\r\n").startswith(b"HTTP/1.1 501")


def test_a_head_past_its_bound_is_answered_431(servers: list[ws.MetricsServer]) -> None:
    server = ws.MetricsServer(lambda: BODY, "127.0.0.1", 0)
    servers.append(server)
    request = b"GET /metrics HTTP/1.0\r\nX-Big: " + b"a" * ws.MAX_HEAD_BYTES + b"\r\n\r\n"
    assert raw(server.port, request).startswith(b"HTTP/1.1 431")


def open_or_cut(sock: socket.socket, within_s: float = 0.5) -> str:
    """ "cut" if the server closed ``sock`` within ``within_s``, else "open"."""
    sock.settimeout(within_s)
    try:
        return "open" if sock.recv(1) else "cut"
    except TimeoutError:
        return "open"
    except OSError:
        return "cut"


def test_at_the_cap_the_connection_idle_longest_goes_first(
    monkeypatch: pytest.MonkeyPatch, servers: list[ws.MetricsServer]
) -> None:
    monkeypatch.setattr(ws, "MAX_CONNECTIONS", 4)
    server = ws.MetricsServer(lambda: BODY, "127.0.0.1", 0)
    servers.append(server)
    socks = []
    for _ in range(4):
        socks.append(socket.create_connection(("127.0.0.1", server.port), timeout=5))
        time.sleep(0.05)
    socks[0].sendall(b"GET /met")  # the oldest, but it spoke last: now the most recently active
    time.sleep(ws.EVICT_MIN_AGE_S + 0.1)  # every one old enough to be evicted
    newcomer = socket.create_connection(("127.0.0.1", server.port), timeout=5)
    time.sleep(0.1)
    assert [open_or_cut(s, 0.2) for s in socks] == ["open", "cut", "open", "open"]
    newcomer.sendall(b"GET /metrics HTTP/1.0\r\n\r\n")  # a scrape at the cap gets in
    assert newcomer.recv(65536).startswith(b"HTTP/1.1 200")
    assert server.evicted == 1
    for s in [*socks, newcomer]:
        s.close()


def test_a_request_being_served_is_never_evicted(
    monkeypatch: pytest.MonkeyPatch, servers: list[ws.MetricsServer]
) -> None:
    monkeypatch.setattr(ws, "MAX_CONNECTIONS", 4)
    monkeypatch.setattr(ws, "EVICT_MIN_AGE_S", 0.0)
    release, rendering = threading.Event(), threading.Event()

    def slow() -> bytes:
        rendering.set()
        release.wait(10)
        return BODY

    server = ws.MetricsServer(slow, "127.0.0.1", 0)
    servers.append(server)
    scrape = socket.create_connection(("127.0.0.1", server.port), timeout=5)
    scrape.sendall(b"GET /metrics HTTP/1.0\r\n\r\n")
    assert rendering.wait(5)
    flood = [socket.create_connection(("127.0.0.1", server.port), timeout=5) for _ in range(12)]
    time.sleep(0.3)
    assert server.evicted >= 12 - 3 and len(server._open) <= 4
    release.set()
    answer = b""
    while chunk := scrape.recv(65536):
        answer += chunk
    assert answer.startswith(b"HTTP/1.1 200") and answer.endswith(BODY)
    for s in [scrape, *flood]:
        s.close()


def test_a_burst_beyond_the_cap_waits_rather_than_evict_young_connections(
    monkeypatch: pytest.MonkeyPatch, servers: list[ws.MetricsServer]
) -> None:
    monkeypatch.setattr(ws, "MAX_CONNECTIONS", 4)
    monkeypatch.setattr(ws, "EVICT_MIN_AGE_S", 0.5)
    server = ws.MetricsServer(lambda: BODY, "127.0.0.1", 0)
    servers.append(server)
    first = [socket.create_connection(("127.0.0.1", server.port), timeout=5) for _ in range(4)]
    start = time.monotonic()
    late = socket.create_connection(("127.0.0.1", server.port), timeout=5)  # in the backlog
    late.sendall(b"GET /metrics HTTP/1.0\r\n\r\n")
    assert late.recv(65536).startswith(b"HTTP/1.1 200")
    assert 0.4 < time.monotonic() - start < 2.0  # it waited until the first were old enough
    assert [open_or_cut(s, 0.2) for s in first].count("cut") == 1 and server.evicted == 1
    for s in [*first, late]:
        s.close()
