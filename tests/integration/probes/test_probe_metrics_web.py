"""A real ``nines probe`` behind ``--web-config-file``: a bcrypt cost that would take hours is
one line before any hashing; the costliest accepted hash lets SIGTERM end a start-up at once;
the probe serves /metrics and its health paths only, gzips only what ``Accept-Encoding``
accepts, and answers HEAD without rendering, over TLS with basic auth from exporter-toolkit's
own file."""

from __future__ import annotations

import base64
import http.client
import json
import signal
import ssl
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import bcrypt
import pytest
from http_variants import accept_encodings, targets
from probe_runs import ROOT
from process_signals import assert_clean, signal_nines
from tls_material import TlsFiles, make_tls

from monitor.processes import probe_argv
from runtime.basic_auth import MAX_BCRYPT_COST, with_cost
from testbroker.ports import free_port

PASSWORD = "scrape-pass-42"
AUTH = {"Authorization": "Basic " + base64.b64encode(f"prometheus:{PASSWORD}".encode()).decode()}


def hashed(cost: int) -> str:
    """A valid hash of PASSWORD at ``cost``, made at cost 04 (a cost-31 one would take days)."""
    return with_cost(bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(4)).decode(), cost)


@pytest.mark.parametrize("cost", sorted({MAX_BCRYPT_COST + 1, 31}))
def test_a_costly_hash_is_one_line_before_any_hashing(
    broker: Any, cost: int, tmp_path: Path
) -> None:
    """Cost 31 took ~42 hours, deaf to SIGTERM; now one line and exit 2 (the timeout is a hang
    detector, hours away from the failure it catches)."""
    web = tmp_path / "web.yml"
    web.write_text(f"basic_auth_users:\n  prometheus: '{hashed(cost)}'\n")
    argv = probe_argv(broker.bootstrap, "costly", "--web-config-file", str(web))
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and f"bcrypt cost {cost} is above {MAX_BCRYPT_COST}" in lines[0]


@pytest.mark.parametrize("delay_s", [0.3, 1.0, 2.0])
def test_sigterm_ends_a_start_up_with_the_costliest_hash(
    broker: Any, delay_s: float, tmp_path: Path
) -> None:
    """The start-up checks each hash at cost 04 only, so nothing holds the main thread in
    bcrypt's C call where a signal handler cannot run."""
    web = tmp_path / "web.yml"
    web.write_text(f"basic_auth_users:\n  prometheus: '{hashed(MAX_BCRYPT_COST)}'\n")
    argv = ["probe", "--bootstrap", broker.bootstrap, "--metrics-port", "0", "--rate", "20"]
    ending = signal_nines(
        [*argv, "--web-config-file", str(web)],
        signal.SIGTERM,
        group=False,
        ready=None,
        tmp=tmp_path,
        delay_s=delay_s,
    )
    assert_clean(ending)
    assert ending.stop_s < 15  # as test_probe_signals: its shutdown_timeout bounds the drain


@pytest.fixture(scope="module")
def tls_probe(
    broker: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[int, TlsFiles]]:
    """One probe behind TLS and basic auth from exporter-toolkit's file (every common key)."""
    tmp = tmp_path_factory.mktemp("webprobe")
    tls = make_tls(tmp / "tls")
    web = tmp / "web.yml"
    user = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(4)).decode()
    web.write_text(
        f"tls_server_config:\n  cert_file: {tls.cert}\n  key_file: {tls.key}\n"
        "  min_version: TLS12\n  max_version: TLS13\n  prefer_server_cipher_suites: true\n"
        f"  cipher_suites: {json.dumps(['TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256'])}\n"
        "http_server_config:\n  http2: true\n  headers:\n    X-Content-Type-Options: nosniff\n"
        f"basic_auth_users:\n  prometheus: '{user}'\n"
    )
    port = free_port()
    argv = probe_argv(broker.bootstrap, "webprobe", "--rate", "20", "--web-config-file", str(web))
    argv[argv.index("--metrics-port") + 1] = str(port)
    with (tmp / "probe.stderr").open("w") as err:
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err, cwd=ROOT)
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, (tmp / "probe.stderr").read_text()
            assert time.monotonic() < deadline, "the probe's /metrics never answered"
            try:
                if ask(connect(port, tls), "GET", "/metrics", AUTH)[0] == 200:
                    break
            except OSError:
                time.sleep(0.2)
        yield port, tls
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0, (tmp / "probe.stderr").read_text()


def connect(port: int, tls: TlsFiles) -> http.client.HTTPSConnection:
    ctx = ssl.create_default_context(cafile=str(tls.ca))
    return http.client.HTTPSConnection("127.0.0.1", port, timeout=10, context=ctx)


def ask(conn: http.client.HTTPConnection, method: str, target: str,
        headers: dict[str, str]) -> tuple[int, dict[str, str], bytes]:  # fmt: skip
    conn.putrequest(method, target, skip_accept_encoding=True)
    for name, value in headers.items():
        conn.putheader(name, value)
    conn.endheaders()
    got = conn.getresponse()
    return got.status, dict(got.headers), got.read()


def test_the_probe_serves_its_paths_only(tls_probe: tuple[int, TlsFiles]) -> None:
    port, tls = tls_probe
    conn = connect(port, tls)
    for target, kind in targets():
        if not target:
            continue
        status, headers, body = ask(conn, "GET", target, AUTH)
        assert status == (200 if kind else 404), target
        assert headers["X-Content-Type-Options"] == "nosniff"
        assert (b"nines_probe_sent_total" in body) == (kind == "metrics"), target


def test_the_probe_gzips_what_accept_encoding_accepts(tls_probe: tuple[int, TlsFiles]) -> None:
    port, tls = tls_probe
    conn = connect(port, tls)
    for header, gzipped in accept_encodings(40):
        status, headers, body = ask(conn, "GET", "/metrics", {**AUTH, "Accept-Encoding": header})
        assert status == 200
        assert (headers.get("Content-Encoding") == "gzip") == gzipped, header
        assert body.startswith(b"\x1f\x8b") == gzipped, header


def test_head_answers_the_headers_only(tls_probe: tuple[int, TlsFiles]) -> None:
    """GET's status and headers, no body and no length (nothing rendered); credentials still
    checked."""
    port, tls = tls_probe
    conn = connect(port, tls)
    status, headers, body = ask(conn, "HEAD", "/metrics", {**AUTH, "Accept-Encoding": "gzip"})
    assert (status, body, headers.get("Content-Encoding")) == (200, b"", "gzip")
    assert "Content-Length" not in headers
    status, headers, body = ask(conn, "HEAD", "/metrics", {"Accept-Encoding": "gzip"})
    assert (status, body) == (401, b"")
