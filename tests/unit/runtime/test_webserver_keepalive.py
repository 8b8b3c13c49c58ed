"""The /metrics server keeps a connection between requests (HTTP/1.1), as Prometheus expects:
two requests share one connection, ``HEAD`` too; ``Connection: close`` and HTTP/1.0 without
keep-alive are honoured; an idle kept connection is cut at ``KEEPALIVE_IDLE_S``, and a next
request that trickles at ``READ_TIMEOUT_S``; pipelined requests are answered in order; at the cap
a kept connection goes only after every incomplete one, and then the least recently used first.
Real sockets on loopback, one server per test."""

from __future__ import annotations

import http.client
import socket
import time
from pathlib import Path

import pytest
from tls_material import make_tls

import runtime.webserver as ws
from runtime.webconfig import load_web_config

BODY = b"# HELP x x\n# TYPE x gauge\nx 1\n"


def serve(servers: list[ws.MetricsServer], **kwargs: object) -> ws.MetricsServer:
    server = ws.MetricsServer(lambda: BODY, "127.0.0.1", 0, **kwargs)  # type: ignore[arg-type]
    servers.append(server)
    return server


def read_response(
    sock: socket.socket, head_only: bool = False
) -> tuple[bytes, dict[str, str], bytes]:
    """One response off ``sock``: (status line, headers, body by its Content-Length)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(1)
        assert chunk, f"closed before a whole head: {data!r}"
        data += chunk
    status, *lines = data[:-4].split(b"\r\n")
    headers = {k.strip().lower(): v.strip() for k, v in (ln.decode().split(":", 1) for ln in lines)}
    length = 0 if head_only else int(headers.get("content-length", "0"))
    body = b""
    while len(body) < length:
        chunk = sock.recv(length - len(body))
        assert chunk, "closed mid-body"
        body += chunk
    return status, headers, body


def closed_within(sock: socket.socket, seconds: float) -> bool:
    """Whether the server closed ``sock`` within ``seconds`` (sending nothing more)."""
    sock.settimeout(seconds)
    try:
        return sock.recv(1) == b""
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True


def test_two_requests_and_a_head_share_one_connection(servers: list[ws.MetricsServer]) -> None:
    server = serve(servers)
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
    answers = []
    for method, path in [("GET", "/metrics"), ("HEAD", "/metrics"), ("GET", "/-/healthy"),
                         ("GET", "/metrics")]:  # fmt: skip
        conn.request(method, path)
        resp = conn.getresponse()
        answers.append((resp.status, resp.version, resp.read(), resp.will_close))
    conn.close()
    assert answers == [(200, 11, BODY, False), (200, 11, b"", False), (200, 11, b"OK\n", False),
                       (200, 11, BODY, False)]  # fmt: skip
    assert server.accepted == 1


def test_tls_and_basic_auth_requests_share_one_connection(
    tmp_path: Path, servers: list[ws.MetricsServer]
) -> None:
    import base64
    import ssl

    import bcrypt

    material = make_tls(tmp_path / "tls")
    hashed = bcrypt.hashpw(b"pw", bcrypt.gensalt(rounds=4)).decode()
    (tmp_path / "web.yml").write_text(
        f"tls_server_config:\n  cert_file: {material.cert}\n  key_file: {material.key}\n"
        f"basic_auth_users:\n  prometheus: '{hashed}'\n"
    )
    server = serve(servers, web=load_web_config(tmp_path / "web.yml"))
    ctx = ssl.create_default_context(cafile=str(material.ca))
    conn = http.client.HTTPSConnection("127.0.0.1", server.port, timeout=5, context=ctx)
    good = {"Authorization": "Basic " + base64.b64encode(b"prometheus:pw").decode()}
    statuses = []
    for headers in (good, {}, good):  # a 401 keeps the connection too, as Go's server does
        conn.request("GET", "/metrics", headers=headers)
        resp = conn.getresponse()
        resp.read()
        statuses.append(resp.status)
    conn.close()
    assert statuses == [200, 401, 200] and server.accepted == 1


@pytest.mark.parametrize(
    ("request_line", "extra", "kept", "said"),
    [
        ("HTTP/1.1", "", True, None),
        ("HTTP/1.1", "Connection: close\r\n", False, "close"),
        ("HTTP/1.0", "", False, "close"),
        ("HTTP/1.0", "Connection: keep-alive\r\n", True, "keep-alive"),
    ],
    ids=["1.1", "1.1-close", "1.0", "1.0-keep-alive"],
)
def test_connection_close_and_http_1_0_are_honoured(
    request_line: str, extra: str, kept: bool, said: str | None, servers: list[ws.MetricsServer]
) -> None:
    server = serve(servers)
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
        sock.sendall(f"GET /metrics {request_line}\r\nHost: x\r\n{extra}\r\n".encode())
        status, headers, body = read_response(sock)
        assert status == b"HTTP/1.1 200 OK" and body == BODY
        assert headers.get("connection") == said
        assert closed_within(sock, 0.5) is not kept


def test_an_idle_kept_connection_is_cut_at_its_deadline(
    monkeypatch: pytest.MonkeyPatch, servers: list[ws.MetricsServer]
) -> None:
    monkeypatch.setattr(ws, "KEEPALIVE_IDLE_S", 0.6)
    server = serve(servers)
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
        sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        read_response(sock)
        start = time.monotonic()
        assert not closed_within(sock, 0.3)  # kept...
        assert closed_within(sock, 2.0)  # ...until its idle deadline
        assert 0.5 < time.monotonic() - start < 1.6
    assert server.timed_out == 1


def test_a_kept_connections_next_head_has_the_head_deadline(
    monkeypatch: pytest.MonkeyPatch, servers: list[ws.MetricsServer]
) -> None:
    monkeypatch.setattr(ws, "KEEPALIVE_IDLE_S", 30.0)
    monkeypatch.setattr(ws, "READ_TIMEOUT_S", 0.6)
    server = serve(servers)
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
        sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        read_response(sock)
        time.sleep(0.8)  # idle past the head deadline: still kept (the idle one is 30 s)
        sock.sendall(b"GET /metr")  # then a slowloris on the kept connection
        start = time.monotonic()
        assert closed_within(sock, 3.0)
        assert 0.4 < time.monotonic() - start < 1.6


def test_pipelined_requests_are_answered_in_order(servers: list[ws.MetricsServer]) -> None:
    server = serve(servers)
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
        sock.sendall(
            b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"
            b"HEAD /-/healthy HTTP/1.1\r\nHost: x\r\n\r\n"
            b"GET /-/healthy HTTP/1.1\r\nHost: x\r\n\r\n"
            b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        )
        got = [read_response(sock, head_only=i == 1)[::2] for i in range(4)]
        assert got == [(b"HTTP/1.1 200 OK", BODY), (b"HTTP/1.1 200 OK", b""),
                       (b"HTTP/1.1 200 OK", b"OK\n"), (b"HTTP/1.1 200 OK", BODY)]  # fmt: skip
        assert closed_within(sock, 1.0)


def test_a_request_with_a_body_is_answered_and_the_connection_closed(
    servers: list[ws.MetricsServer],
) -> None:
    server = serve(servers)
    for request in (
        b"POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello",
        b"GET /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello",
        b"GET /metrics HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n",
    ):
        with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
            sock.sendall(request)
            status, headers, _ = read_response(sock)  # the body is never taken for a request
            assert status.split()[1] in (b"200", b"501") and headers["connection"] == "close"
            assert closed_within(sock, 2.0)


def test_at_the_cap_kept_connections_go_after_incomplete_ones_least_recent_first(
    monkeypatch: pytest.MonkeyPatch, servers: list[ws.MetricsServer]
) -> None:
    monkeypatch.setattr(ws, "MAX_CONNECTIONS", 4)
    monkeypatch.setattr(ws, "EVICT_MIN_AGE_S", 0.05)
    server = serve(servers)
    kept = [http.client.HTTPConnection("127.0.0.1", server.port, timeout=5) for _ in range(2)]
    for conn in (*kept, kept[0]):  # the second is the least recently used
        conn.request("GET", "/metrics")
        conn.getresponse().read()
    junk = [socket.create_connection(("127.0.0.1", server.port), timeout=5) for _ in range(6)]
    time.sleep(0.5)  # a flood of never-served connections: they evict each other, not the kept
    assert server.evicted == 4 and [closed_within(s, 0.1) for s in junk].count(True) == 4
    for conn in kept:
        conn.request("GET", "/metrics")
        assert conn.getresponse().read() == BODY
    assert server.accepted == 8
    for s in junk:
        s.close()
    time.sleep(0.3)
    kept[0].request("GET", "/metrics")  # kept[1] is now the least recently used
    kept[0].getresponse().read()
    more = [http.client.HTTPConnection("127.0.0.1", server.port, timeout=5) for _ in range(3)]
    for conn in more:  # served, then kept: only kept connections are left to evict
        conn.request("GET", "/metrics")
        assert conn.getresponse().read() == BODY
    assert closed_within(kept[1].sock, 0.5) and not closed_within(kept[0].sock, 0.2)  # type: ignore[arg-type]
    for conn in (*kept, *more):
        conn.close()
