"""Both /metrics servers answer ``/-/ready`` cheaply: nothing rendered, no credentials needed.

The chart's readiness probe reads it (a kubelet cannot send basic auth without writing the
password into the pod spec); /metrics itself stays behind TLS and basic auth.
"""

from __future__ import annotations

import base64
import ssl
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any

import bcrypt
import pytest
from tls_material import make_tls

from probes.metrics import serve
from runtime.webconfig import READY_PATH, WebConfig, load_web_config
from runtime.webserver import MetricsServer

PASSWORD = "scrape-pass"


@pytest.fixture(scope="module")
def web(tmp_path_factory: pytest.TempPathFactory) -> tuple[WebConfig, ssl.SSLContext]:
    """A web config with TLS and one bcrypt user, and a client context trusting its CA."""
    tmp = tmp_path_factory.mktemp("web")
    tls = make_tls(tmp / "tls")
    hashed = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(rounds=4)).decode()
    path = tmp / "web.yml"
    path.write_text(
        f"tls_server_config:\n  cert_file: {tls.cert}\n  key_file: {tls.key}\n"
        f"basic_auth_users:\n  prometheus: '{hashed}'\n"
    )
    config = load_web_config(path)
    assert config is not None
    return config, ssl.create_default_context(cafile=str(tls.ca))


def get(url: str, ctx: ssl.SSLContext, auth: bool = False) -> tuple[int, bytes]:
    request = urllib.request.Request(url)
    if auth:
        token = base64.b64encode(f"prometheus:{PASSWORD}".encode()).decode()
        request.add_header("Authorization", f"Basic {token}")
    try:
        with urllib.request.urlopen(request, context=ctx, timeout=10) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def exporter(web: WebConfig, renders: list[int]) -> Iterator[int]:
    def body() -> bytes:
        renders.append(1)
        return b"nines_up 1\n"

    server = MetricsServer(body, "127.0.0.1", 0, web)
    try:
        yield server.port
    finally:
        server.close()


def probe(web: WebConfig, renders: list[int]) -> Iterator[int]:
    def snapshot() -> dict[str, Any]:
        renders.append(1)
        raise AssertionError("rendered")  # a readiness check must never get here

    server = serve(snapshot, "127.0.0.1", 0, web)
    try:
        yield server.port
    finally:
        server.close()


@pytest.mark.parametrize("start", [exporter, probe], ids=["stream-exporter", "probe"])
def test_ready_is_cheap_and_needs_no_credentials(
    web: tuple[WebConfig, ssl.SSLContext],
    start: Callable[[WebConfig, list[int]], Iterator[int]],
) -> None:
    config, ctx = web
    renders: list[int] = []
    servers = start(config, renders)
    port = next(servers)
    try:
        base = f"https://127.0.0.1:{port}"
        for _ in range(3):
            assert get(base + READY_PATH, ctx) == (200, b"OK\n")
        assert renders == []  # nothing rendered for readiness
        status, _ = get(base + "/metrics", ctx)
        assert status == 401  # /metrics stays behind basic auth
        assert renders == []
        if start is exporter:
            assert get(base + "/metrics", ctx, auth=True) == (200, b"nines_up 1\n")
            assert renders == [1]
    finally:
        servers.close()
