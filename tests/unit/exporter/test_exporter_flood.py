"""The stream's /metrics server (``LatencyExporter.serve``, as ``nines stream`` runs it) answers
every scrape within 1 s while 1,100 connections from the scraper's own address (127.0.0.1) sit
idle, trickle a request head (or a TLS ClientHello) a byte a second, or stop mid-handshake,
each reopened when cut: more than twice the connection cap, which holds throughout.

And a CPU attack: 1,100 connections that each send a ClientHello, take the server's signed
answer, reset and reconnect at once. A scraper on a new connection each time loses scrapes to
it (its handshake queues with the flood's); one that keeps its connection, as Prometheus does,
gets every scrape answered within 1 s on that one connection."""

from __future__ import annotations

import time
from pathlib import Path

import bcrypt
import pytest
from metrics_flood import Flood, Scraper, raise_own_open_files
from tls_material import make_tls

import runtime.webserver as ws
from monitor.exporter import LatencyExporter
from runtime.webconfig import load_web_config

PLAIN = {"idle": 550, "trickle": 550}
TLS = {"idle": 450, "trickle": 500, "hello": 150}  # trickle: a ClientHello a byte a second
CHURN = {"churn": 1100}  # a ClientHello, the server's signature, a reset, again at once
FLOOD_S = 4.0
PASSWORD = "scrape-pass-42"


@pytest.mark.parametrize(
    ("kinds", "keep_alive"),
    [(PLAIN, False), (TLS, False), (CHURN, True)],
    ids=["plain", "tls", "tls-churn-keep-alive"],
)
def test_the_stream_exporter_answers_scrapes_within_1s_under_a_flood(
    kinds: dict[str, int], keep_alive: bool, tmp_path: Path
) -> None:
    tls = kinds is not PLAIN
    assert sum(kinds.values()) >= max(2 * ws.MAX_CONNECTIONS, 1001)
    raise_own_open_files(ws.MAX_CONNECTIONS + 500)  # the flood raises its own
    web, ca, password = None, None, None
    if tls:
        material = make_tls(tmp_path / "tls")
        hashed = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(rounds=4)).decode()
        (tmp_path / "web.yml").write_text(
            f"tls_server_config:\n  cert_file: {material.cert}\n  key_file: {material.key}\n"
            f"basic_auth_users:\n  prometheus: '{hashed}'\n"
        )
        web, ca, password = load_web_config(tmp_path / "web.yml"), material.ca, PASSWORD
    server = LatencyExporter().serve("127.0.0.1", 0, web)
    peak = 0
    try:
        scraper = Scraper(server.port, ca=ca, password=password, every_s=0.2, keep_alive=keep_alive)
        if keep_alive:  # scraping before the flood, as Prometheus would be
            scraper.start()
            time.sleep(0.5)
        flood = Flood(server.port, kinds, duration_s=FLOOD_S + 10, reopen_s=1.0, tls=tls)
        with flood:
            time.sleep(1.0)  # every flood connection opened, the cap reached
            if keep_alive:
                scraper.reset()
            else:
                scraper.start()
            end = time.monotonic() + FLOOD_S
            while time.monotonic() < end:
                peak = max(peak, len(server._open))
                time.sleep(0.02)
            scraper.stop()
        seen = flood.stop()
    finally:
        server.close()
    what = "TLS" if tls else "plain"
    print(f"\n{what} {kinds}: {seen}; server open at most {peak}, evicted {server.evicted}, "
          f"timed out {server.timed_out}; scrapes {scraper.summary()}")  # fmt: skip
    assert seen["peak_open"] >= sum(kinds.values()) * 0.95, seen  # the flood was all open at once
    assert peak <= ws.MAX_CONNECTIONS  # ...and the server held no more than its cap
    assert server.evicted >= sum(kinds.values()) - ws.MAX_CONNECTIONS
    assert len(scraper.times_s) >= FLOOD_S / 0.2 * 0.6, scraper.summary()
    assert all(t is not None and t < 1.0 for t in scraper.times_s), scraper.summary()
    if keep_alive:  # every scrape on the connection opened before the flood
        assert scraper.connections == 1, scraper.summary()
