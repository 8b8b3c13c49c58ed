"""What a request may ask of /metrics, on a real server and real sockets: gzip only when
``Accept-Encoding`` accepts it (q-values, whole tokens), ``/metrics`` and the health paths and
nothing else (404), variants generated from small grammars; basic auth that costs a wrong user
name what it costs a wrong password; every key of exporter-toolkit's web config."""

from __future__ import annotations

import base64
import gzip
import http.client
import itertools
import os
import random
import ssl
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import bcrypt
import pytest
from http_variants import accept_encodings, targets
from tls_material import TlsFiles, make_tls

import runtime.webserver as ws
from core.config import ConfigError
from runtime import basic_auth, webconfig
from runtime.webconfig import load_web_config

BODY = b"# HELP x x\n# TYPE x gauge\n" + b"".join(b'x{i="%d"} 1\n' % i for i in range(200))
PASSWORD = "scrape-pass-42"


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    return make_tls(tmp_path_factory.mktemp("tls"))


def start(servers: list[ws.MetricsServer], web: webconfig.WebConfig | None = None,
          body: Callable[[], bytes] = lambda: BODY) -> ws.MetricsServer:  # fmt: skip
    server = ws.MetricsServer(body, "127.0.0.1", 0, web)
    servers.append(server)
    return server


def ask(conn: http.client.HTTPConnection, method: str, target: str,
        headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:  # fmt: skip
    """(status, headers, body) of one request on a kept connection."""
    conn.putrequest(method, target, skip_host=False, skip_accept_encoding=True)
    for name, value in (headers or {}).items():
        conn.putheader(name, value)
    conn.endheaders()
    got = conn.getresponse()
    return got.status, dict(got.headers), got.read()


# -- Accept-Encoding -------------------------------------------------------------------------


def test_gzip_only_when_accept_encoding_accepts_it(servers: list[ws.MetricsServer]) -> None:
    server = start(servers)
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
    cases = list(accept_encodings(150))
    assert sum(ok for _, ok in cases) > 20 and sum(not ok for _, ok in cases) > 20
    for header, gzipped in cases:
        status, headers, body = ask(conn, "GET", "/metrics", {"Accept-Encoding": header})
        assert status == 200, header
        assert (headers.get("Content-Encoding") == "gzip") == gzipped, header
        assert (gzip.decompress(body) if gzipped else body) == BODY, header
        assert ws.accepts_gzip(header) == gzipped, header
    _, headers, body = ask(conn, "GET", "/metrics")  # no header at all: identity
    assert "Content-Encoding" not in headers and body == BODY


# -- paths -----------------------------------------------------------------------------------


def test_only_metrics_and_health_paths_are_served(servers: list[ws.MetricsServer]) -> None:
    renders: list[int] = []
    server = start(servers, body=lambda: renders.append(1) or BODY)
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
    cases = [(t, k) for t, k in targets() if t]
    for target, kind in cases:
        for method in ("GET", "HEAD"):
            before = len(renders)
            status, _, body = ask(conn, method, target)
            assert status == (200 if kind else 404), (method, target)
            if method == "HEAD":
                assert body == b""
            elif kind == "metrics":
                assert body == BODY, target
            else:
                assert BODY not in body and len(body) < 100, target
            assert len(renders) - before == (method == "GET" and kind == "metrics"), target
    assert sum(k is None for _, k in cases) > 40


# -- basic auth timing -----------------------------------------------------------------------


def basic(user: str, password: str) -> dict[str, str]:
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    return {"Authorization": f"Basic {token}"}


def user_names(n: int, seed: int = 7) -> list[str]:
    """Unknown user names: near misses of the configured ones, and random ones."""
    rng = random.Random(seed)
    near = ["prometheus ", "Prometheus", "prometheu", "prometheuss", "", "admin", "root"]
    alphabet = "abcdefghijklmnopqrstuvwxyzABCDEF0123456789-_.é"
    return near + ["".join(rng.choices(alphabet, k=rng.randint(1, 30))) for _ in range(n)]


def test_an_unknown_user_pays_a_bcrypt_check_at_the_users_cost(
    tmp_path: Path, servers: list[ws.MetricsServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Counted through bcrypt itself: every wrong name, like every wrong password, runs one
    ``checkpw`` at the configured cost (the highest, when users have several)."""
    users = {"prometheus": 6, "grafana": 5}
    lines = [f"  {u}: '{bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(c)).decode()}'"
             for u, c in users.items()]  # fmt: skip
    (tmp_path / "web.yml").write_text("basic_auth_users:\n" + "\n".join(lines) + "\n")
    web = load_web_config(tmp_path / "web.yml")
    costs: list[int] = []
    real = bcrypt.checkpw

    def counted(password: bytes, hashed: bytes) -> bool:
        costs.append(int(hashed[4:6]))
        return real(password, hashed)

    monkeypatch.setattr(bcrypt, "checkpw", counted)
    server = start(servers, web)
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
    for name in user_names(30):
        del costs[:]
        status, _, _ = ask(conn, "GET", "/metrics", basic(name, PASSWORD))
        assert (status, costs) == (401, [6]), name
    for name, cost in users.items():
        del costs[:]
        assert ask(conn, "GET", "/metrics", basic(name, "wrong"))[0] == 401
        assert costs == [cost]
    assert ask(conn, "GET", "/metrics", basic("prometheus", PASSWORD))[0] == 200


def test_a_wrong_user_name_takes_as_long_as_a_wrong_password(
    tmp_path: Path, tls: TlsFiles, servers: list[ws.MetricsServer]
) -> None:
    """TLS and basic auth, tries interleaved on one kept connection: the medians of a wrong
    name and of a wrong password are within a margin set by their own spread (before: 0.4 ms
    against ~10 ms at cost 7)."""
    hashed = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(7)).decode()
    (tmp_path / "web.yml").write_text(
        f"tls_server_config:\n  cert_file: {tls.cert}\n  key_file: {tls.key}\n"
        f"basic_auth_users:\n  prometheus: '{hashed}'\n"
    )
    server = start(servers, load_web_config(tmp_path / "web.yml"))
    ctx = ssl.create_default_context(cafile=str(tls.ca))
    conn = http.client.HTTPSConnection("127.0.0.1", server.port, timeout=10, context=ctx)
    times: dict[str, list[float]] = {"name": [], "password": []}
    for i, name in zip(range(30), itertools.cycle(user_names(30))):
        for kind in ("name", "password") if i % 2 else ("password", "name"):
            auth = basic(name, PASSWORD) if kind == "name" else basic("prometheus", f"w{i}")
            t0 = time.perf_counter()
            assert ask(conn, "GET", "/metrics", auth)[0] == 401
            times[kind].append(time.perf_counter() - t0)
    med = {k: statistics.median(v) for k, v in times.items()}
    spread = max(statistics.quantiles(v, n=4)[2] - statistics.quantiles(v, n=4)[0]
                 for v in times.values())  # fmt: skip
    assert abs(med["name"] - med["password"]) <= max(0.5 * med["password"], 2 * spread), (
        med,
        spread,
    )


# -- the bcrypt cost -------------------------------------------------------------------------


def test_start_up_hashes_nothing_at_the_hashs_cost(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The highest cost accepted costs a start-up bcrypt checks at cost 04 only; every cost above
    it is one line before any hashing (cost 31 took ~42 hours, deaf to SIGTERM)."""
    top = basic_auth.MAX_BCRYPT_COST
    salt = bcrypt.gensalt(4).decode()
    good = bcrypt.hashpw(b"pw", salt.encode()).decode()
    calls: list[bytes] = []
    real = bcrypt.checkpw
    monkeypatch.setattr(bcrypt, "checkpw", lambda p, h: calls.append(h) or real(p, h))
    path = tmp_path / "web.yml"
    path.write_text(f"basic_auth_users:\n  a: '{basic_auth.with_cost(good, top)}'\n")
    assert load_web_config(path) is not None
    assert calls and all(h[4:6] == b"04" for h in calls)
    for cost in range(top + 1, 32):
        calls.clear()
        path.write_text(f"basic_auth_users:\n  a: '{basic_auth.with_cost(good, cost)}'\n")
        with pytest.raises(ConfigError) as err:
            load_web_config(path)
        assert str(err.value) == (
            f"web-config-file.basic_auth_users: user 'a': bcrypt cost {cost} is above {top}, the "
            "most a scrape can wait for (each step doubles a check); hash again with e.g. "
            "htpasswd -nBC 10 USER"
        )
        assert calls == []


# -- exporter-toolkit's whole file -----------------------------------------------------------


def toolkit_file(tls: TlsFiles, **tls_keys: Any) -> str:
    """A web config as exporter-toolkit documents it, every key set."""
    hashed = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(4)).decode()
    keys = {
        "cert_file": str(tls.cert),
        "key_file": str(tls.key),
        "client_auth_type": "RequireAndVerifyClientCert",
        "client_ca_file": str(tls.ca),
        "client_allowed_sans": ["localhost"],
        "min_version": "TLS12",
        "max_version": "TLS12",
        "cipher_suites": ["TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384", "TLS_AES_128_GCM_SHA256"],
        "prefer_server_cipher_suites": True,
        "curve_preferences": ["CurveP256"],
        **tls_keys,
    }
    import json

    body = "\n".join(f"  {k}: {json.dumps(v)}" for k, v in keys.items() if v is not None)
    return (
        f"tls_server_config:\n{body}\n"
        "http_server_config:\n  http2: true\n  headers:\n"
        "    X-Frame-Options: deny\n    X-Content-Type-Options: nosniff\n"
        "    Strict-Transport-Security: max-age=31536000\n"
        f"basic_auth_users:\n  prometheus: '{hashed}'\n"
    )


def client(tls: TlsFiles, cert: bool = True, **options: Any) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(tls.ca))
    if cert:
        ctx.load_cert_chain(str(tls.cert), str(tls.key))  # its SANs: 127.0.0.1, localhost
    for name, value in options.items():
        setattr(ctx, name, value)
    return ctx


def scrape(port: int, ctx: ssl.SSLContext) -> tuple[int, dict[str, str], str]:
    conn = http.client.HTTPSConnection("127.0.0.1", port, timeout=5, context=ctx)
    status, headers, _ = ask(conn, "GET", "/metrics", basic("prometheus", PASSWORD))
    cipher = conn.sock.cipher()[0] if conn.sock else ""  # type: ignore[union-attr]
    conn.close()
    return status, headers, cipher


def test_exporter_toolkits_file_works_whole(
    tmp_path: Path, tls: TlsFiles, servers: list[ws.MetricsServer]
) -> None:
    (tmp_path / "web.yml").write_text(toolkit_file(tls))
    server = start(servers, load_web_config(tmp_path / "web.yml"))
    status, headers, cipher = scrape(server.port, client(tls))
    assert (status, cipher) == (200, "ECDHE-RSA-AES256-GCM-SHA384")
    assert headers["X-Frame-Options"] == "deny" and headers["X-Content-Type-Options"] == "nosniff"
    assert headers["Strict-Transport-Security"] == "max-age=31536000"
    # max_version TLS12: a client that speaks TLS 1.3 only is refused
    with pytest.raises(ssl.SSLError):
        scrape(server.port, client(tls, minimum_version=ssl.TLSVersion.TLSv1_3))
    # the cipher list: a client that offers only another suite is refused
    only_128 = client(tls)
    only_128.set_ciphers("ECDHE-RSA-AES128-GCM-SHA256")
    with pytest.raises((ssl.SSLError, ConnectionError)):
        scrape(server.port, only_128)


@pytest.mark.parametrize(
    ("sans", "allowed"),
    [(["localhost"], True), (["127.0.0.1"], True), (["other.example", "127.0.0.1"], True),
     (["other.example"], False), (["LOCALHOST"], False), (["127.0.0.2"], False),
     (["localhost.", "::1"], False)],
)  # fmt: skip
def test_client_allowed_sans(
    sans: list[str], allowed: bool, tmp_path: Path, tls: TlsFiles, servers: list[ws.MetricsServer]
) -> None:
    """Exact matches of the client certificate's SANs (DNS:localhost, IP:127.0.0.1)."""
    (tmp_path / "web.yml").write_text(toolkit_file(tls, client_allowed_sans=sans))
    server = start(servers, load_web_config(tmp_path / "web.yml"))
    if allowed:
        assert scrape(server.port, client(tls))[0] == 200
    else:
        with pytest.raises((ssl.SSLError, ConnectionError, http.client.HTTPException)):
            scrape(server.port, client(tls))


def test_tls_files_are_read_once(
    tmp_path: Path, tls: TlsFiles, servers: list[ws.MetricsServer]
) -> None:
    """The certificate and key checked at load are the ones served: replaced (or removed)
    after the check, the server still serves the bytes it read, and never reads the paths
    again."""
    import shutil

    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    shutil.copy(tls.cert, cert)
    shutil.copy(tls.key, key)
    (tmp_path / "web.yml").write_text(f"tls_server_config:\n  cert_file: {cert}\n"
                                      f"  key_file: {key}\n")  # fmt: skip
    web = load_web_config(tmp_path / "web.yml")
    cert.write_text("not a certificate\n")
    key.unlink()
    os.mkfifo(key)  # read again by path, it would hang OpenSSL's read
    server = start(servers, web)
    conn = http.client.HTTPSConnection("127.0.0.1", server.port, timeout=5, context=client(tls))
    assert ask(conn, "GET", "/metrics")[0] == 200


def test_inline_pem_and_unsupported_keys(tmp_path: Path, tls: TlsFiles,
                                         servers: list[ws.MetricsServer]) -> None:  # fmt: skip
    """``cert``/``key`` inline as exporter-toolkit takes them; ``rate_limit`` and a list of
    curves are one line naming them."""
    import json

    text = (f"tls_server_config:\n  cert: {json.dumps(tls.cert.read_text())}\n"
            f"  key: {json.dumps(tls.key.read_text())}\n")  # fmt: skip
    (tmp_path / "web.yml").write_text(text)
    server = start(servers, load_web_config(tmp_path / "web.yml"))
    conn = http.client.HTTPSConnection("127.0.0.1", server.port, timeout=5, context=client(tls))
    assert ask(conn, "GET", "/metrics")[0] == 200
    refused = {
        "rate_limit: {interval: 1s, burst: 10}\n": "web-config-file.rate_limit: not supported",
        toolkit_file(tls, curve_preferences=["X25519", "CurveP256"]):
            "web-config-file.tls_server_config.curve_preferences: nines applies one curve only",
    }  # fmt: skip
    for text, message in refused.items():
        (tmp_path / "web.yml").write_text(text)
        with pytest.raises(ConfigError) as err:
            load_web_config(tmp_path / "web.yml")
        assert str(err.value).startswith(message) and "\n" not in str(err.value)


# -- renders shared ---------------------------------------------------------------------------


def test_scrapes_that_arrive_during_a_render_share_the_next_one(
    servers: list[ws.MetricsServer],
) -> None:
    """A scrape never gets a body rendered before it arrived, and scrapes that arrive while one
    renders share the next render: 1 + 6 scrapes, 2 renders, the 6 get the second body."""
    import threading

    started, gate, count = threading.Event(), threading.Event(), itertools.count(1)

    def render() -> bytes:
        n = next(count)
        started.set()
        if n == 1:
            gate.wait(10)
        return b"render %d\n" % n

    server = start(servers, body=render)
    got: dict[str, bytes] = {}

    def scrape(name: str) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
        got[name] = ask(conn, "GET", "/metrics")[2]

    first = threading.Thread(target=scrape, args=("first",))
    first.start()
    assert started.wait(10)
    later = [threading.Thread(target=scrape, args=(f"later{i}",)) for i in range(6)]
    for t in later:
        t.start()
    deadline = time.monotonic() + 10
    while True:  # every later scrape waits on the render after the first one
        flight = server._flights.get(server._body)
        if flight is not None and flight.next is not None and flight.next.scrapes == 6:
            break
        assert time.monotonic() < deadline, "the later scrapes never reached the renderer"
        time.sleep(0.01)
    gate.set()
    for t in [first, *later]:
        t.join(10)
    assert got.pop("first") == b"render 1\n"
    assert set(got.values()) == {b"render 2\n"} and len(got) == 6
    assert next(count) == 3  # two renders in all
