"""The /metrics server outlives its clients: idle, trickling, slow-reading and flooding clients
cost a bounded share; a scrape is still served; ``close()`` is prompt. Real sockets on loopback,
with the timeouts shortened so each case takes about a second."""

from __future__ import annotations

import base64
import gzip
import socket
import ssl
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import bcrypt
import pytest
from tls_material import TlsFiles, make_tls

import runtime.webserver as ws
from core import gzip_parts, promproto
from runtime.webconfig import WebConfig, load_web_config

BODY = b"# HELP x x\n# TYPE x gauge\nx 1\n"
SHORT_S = 0.5  # every timeout, in these tests
PASSWORD = "scrape-pass-42"


@pytest.fixture(autouse=True)
def short_timeouts(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("TLS_HANDSHAKE_TIMEOUT_S", "READ_TIMEOUT_S", "WRITE_TIMEOUT_S", "RENDER_WAIT_S"):
        monkeypatch.setattr(ws, name, SHORT_S)


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    return make_tls(tmp_path_factory.mktemp("tls"))


def tls_web(tmp_path: Path, tls: TlsFiles, users: bool = True) -> WebConfig:
    hashed = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(rounds=4)).decode()
    text = f"tls_server_config:\n  cert_file: {tls.cert}\n  key_file: {tls.key}\n"
    if users:
        text += f"basic_auth_users:\n  prometheus: '{hashed}'\n"
    (tmp_path / "web.yml").write_text(text)
    web = load_web_config(tmp_path / "web.yml")
    assert web is not None
    return web


def auth(password: str = PASSWORD) -> str:
    return "Basic " + base64.b64encode(f"prometheus:{password}".encode()).decode()


def get(
    port: int,
    path: str = "/metrics",
    ca: Path | None = None,
    headers: dict[str, str] | None = None,
    timeout_s: float = 5,
) -> tuple[int, dict[str, str], bytes]:
    """(status, headers, body) of one GET, errors included."""
    scheme = "https" if ca else "http"
    req = urllib.request.Request(f"{scheme}://127.0.0.1:{port}{path}", headers=headers or {})
    ctx = ssl.create_default_context(cafile=str(ca)) if ca else None
    try:
        with urllib.request.urlopen(req, timeout=timeout_s, context=ctx) as resp:
            return resp.status, dict(resp.headers), resp.read()
    except urllib.error.HTTPError as err:
        return err.code, dict(err.headers), err.read()


def idle(port: int, n: int) -> list[socket.socket]:
    return [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(n)]


def cut_within(sock: socket.socket, bound_s: float) -> float:
    """Seconds until the server closed ``sock`` (reading whatever it sent); fails past bound_s."""
    start = time.monotonic()
    sock.settimeout(bound_s)
    try:
        while sock.recv(65536):
            pass
    except ConnectionResetError:
        pass
    except TimeoutError:
        pytest.fail(f"the server kept the connection open past {bound_s} s")
    return time.monotonic() - start


def serve(servers: list[ws.MetricsServer], body=lambda: BODY, web=None) -> ws.MetricsServer:  # type: ignore[no-untyped-def]
    server = ws.MetricsServer(body, "127.0.0.1", 0, web)
    servers.append(server)
    return server


def test_idle_tls_clients_stall_neither_scrapes_nor_close(
    tmp_path: Path, tls: TlsFiles, servers: list[ws.MetricsServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    handshake_s = 3.0
    monkeypatch.setattr(ws, "TLS_HANDSHAKE_TIMEOUT_S", handshake_s)
    server = serve(servers, web=tls_web(tmp_path, tls))
    held = idle(server.port, 20)  # connect, send nothing: the handshake never starts
    start = time.monotonic()
    status, _, body = get(server.port, ca=tls.ca, headers={"Authorization": auth()})
    assert (status, body) == (200, BODY)
    assert time.monotonic() - start < handshake_s / 2  # served at once, not after the idle ones
    for sock in held:  # each cut at its handshake deadline
        assert cut_within(sock, handshake_s + 2) < handshake_s + 2
    more = idle(server.port, 5)
    start = time.monotonic()
    server.close()
    assert time.monotonic() - start < 1.0
    for sock in more:
        assert cut_within(sock, 1.0) < 1.0


def test_a_slowloris_is_cut_at_the_read_deadline_however_it_trickles(
    servers: list[ws.MetricsServer],
) -> None:
    server = serve(servers)
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=5)
    request = b"GET /metrics HTTP/1.1\r\nHost: x\r\n" + b"X-Slow: " + b"a" * 100
    start = time.monotonic()
    sent = 0
    try:
        for byte in request:  # a byte every 50 ms: each read succeeds, the head never ends
            sock.send(bytes([byte]))
            sent += 1
            time.sleep(0.05)
            if time.monotonic() - start > SHORT_S + 2:
                break
    except (BrokenPipeError, ConnectionResetError):
        pass
    elapsed = time.monotonic() - start + cut_within(sock, 2)
    assert SHORT_S * 0.9 < elapsed < SHORT_S + 1.5, elapsed
    assert sent < len(request)
    assert get(server.port)[0] == 200


def test_a_client_that_never_reads_is_cut_at_the_write_deadline(
    servers: list[ws.MetricsServer],
) -> None:
    big = bytes(64 * 1024 * 1024)  # far beyond what socket buffers hold
    server = serve(servers, body=lambda: big)
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=5)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.sendall(b"GET /metrics HTTP/1.0\r\n\r\n")
    deadline = time.monotonic() + SHORT_S + 3
    while server._open and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not server._open, "the slow reader's connection outlived the write deadline"
    sock.close()
    assert get(server.port, path="/-/ready") == (200, get(server.port, "/-/ready")[1], b"OK\n")


def test_renderers_are_bounded_and_a_full_pool_answers_503(
    servers: list[ws.MetricsServer],
) -> None:
    release = threading.Event()
    rendering = threading.Semaphore(0)

    def slow_body() -> bytes:
        rendering.release()
        release.wait(10)
        return BODY

    # two formats, so two renders at once (scrapes of one format share a render)
    server = ws.MetricsServer(slow_body, "127.0.0.1", 0, protobuf=lambda: slow_body())
    servers.append(server)
    assert ws.MAX_RENDERS == 2
    results: list[int] = []
    accepts = [{}, {"Accept": promproto.CONTENT_TYPE}]
    blocked = [
        threading.Thread(target=lambda h=h: results.append(get(server.port, headers=h)[0]))
        for h in accepts
    ]
    for t in blocked:
        t.start()
    for _ in blocked:
        assert rendering.acquire(timeout=5)
    start = time.monotonic()
    status, headers, text = get(server.port, headers={"Accept": promproto.CONTENT_TYPE})
    assert status == 503 and headers["Retry-After"] == str(ws.RETRY_AFTER_S)
    assert SHORT_S * 0.9 < time.monotonic() - start < SHORT_S + 1
    assert b"retry" in text and server.busy_answers == 1
    assert get(server.port, "/-/healthy")[0] == 200  # health needs no renderer
    release.set()
    for t in blocked:
        t.join(5)
    assert results == [200] * ws.MAX_RENDERS
    assert get(server.port)[0] == 200


def test_beyond_the_connection_cap_clients_wait_and_are_served(
    monkeypatch: pytest.MonkeyPatch, servers: list[ws.MetricsServer]
) -> None:
    monkeypatch.setattr(ws, "MAX_CONNECTIONS", 4)
    server = serve(servers)
    held = idle(server.port, 4)  # every slot taken by a client that sends nothing
    time.sleep(0.1)
    start = time.monotonic()
    status, _, body = get(server.port, timeout_s=SHORT_S + 3)
    # in the backlog until the idle ones are old enough to evict, then served at once
    assert (status, body) == (200, BODY)
    assert server.evicted == 1
    assert time.monotonic() - start < SHORT_S + 1.5
    for sock in held:
        sock.close()


def test_a_flood_of_scrapes_renders_and_compresses_an_unchanged_body_once(
    monkeypatch: pytest.MonkeyPatch, servers: list[ws.MetricsServer]
) -> None:
    body = BODY * 1000
    compressions = []
    real = gzip_parts.deflate
    monkeypatch.setattr(
        gzip_parts, "deflate", lambda data, level: compressions.append(1) or real(data, level)
    )
    server = serve(servers, body=lambda: body)
    statuses: list[int] = []

    def flood() -> None:
        for _ in range(25):
            status, headers, data = get(server.port, headers={"Accept-Encoding": "gzip"})
            statuses.append(status)
            assert gzip.decompress(data) == body and headers["Content-Encoding"] == "gzip"

    threads = [threading.Thread(target=flood) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert statuses == [200] * 200
    assert len(compressions) == 1


def test_credentials_are_checked_per_request_and_health_needs_none(
    tmp_path: Path, tls: TlsFiles, servers: list[ws.MetricsServer]
) -> None:
    calls = []
    server = serve(servers, body=lambda: calls.append(1) or BODY, web=tls_web(tmp_path, tls))
    assert get(server.port, ca=tls.ca)[0] == 401
    assert get(server.port, ca=tls.ca, headers={"Authorization": auth("nope")})[0] == 401
    assert get(server.port, "/-/ready", ca=tls.ca)[:3:2] == (200, b"OK\n")
    assert calls == []  # neither a refused scrape nor a health check renders
    assert get(server.port, ca=tls.ca, headers={"Authorization": auth()})[0] == 200
    assert calls == [1]
