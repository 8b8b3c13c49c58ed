"""A real Prometheus keeps one TLS connection to the stream's /metrics across its scrapes (HTTP/1.1
keep-alive, Go's transport), so a flood of TLS handshakes does not reach its scrapes: while
1,100 connections from 127.0.0.1 each send a ClientHello, take the server's signed answer,
reset and reconnect, every scrape is up within Prometheus' 1 s timeout, on the same connection.
Prometheus' own ``net_conntrack_dialer_conn_established_total`` counts its connections."""

from __future__ import annotations

import re
import time
import urllib.request
from pathlib import Path

import bcrypt
from e2e_servers import Prometheus, require_prometheus, wait_until
from metrics_flood import Flood, raise_own_open_files
from tls_material import make_tls

import runtime.webserver as ws
from monitor.exporter import LatencyExporter
from runtime.webconfig import load_web_config

PASSWORD = "scrape-pass-42"
CHURN = {"churn": 1100}  # a ClientHello, the server's signature, a reset, again at once
FLOOD_S = 6.0


def dialed(prom: Prometheus, job: str) -> float:
    """Connections Prometheus established to ``job``'s target (its own conntrack counter)."""
    with urllib.request.urlopen(prom.url + "/metrics", timeout=5) as resp:
        text = resp.read().decode()
    pattern = rf'^net_conntrack_dialer_conn_established_total{{dialer_name="{job}"}} (\S+)$'
    found = re.search(pattern, text, re.MULTILINE)
    assert found, f"no conntrack counter for {job}"
    return float(found.group(1))


def test_prometheus_keeps_one_tls_connection_through_a_handshake_flood(tmp_path: Path) -> None:
    require_prometheus()
    raise_own_open_files(ws.MAX_CONNECTIONS + 500)
    material = make_tls(tmp_path / "tls")
    hashed = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(rounds=4)).decode()
    (tmp_path / "web.yml").write_text(
        f"tls_server_config:\n  cert_file: {material.cert}\n  key_file: {material.key}\n"
        f"basic_auth_users:\n  prometheus: '{hashed}'\n"
    )
    server = LatencyExporter().serve("127.0.0.1", 0, load_web_config(tmp_path / "web.yml"))
    scrapes: list[float] = []
    server._on_scrape = lambda _addr: scrapes.append(time.monotonic())
    (tmp_path / "prom").mkdir()
    options = {
        "nines": {
            "scheme": "https",
            "tls_config": {"ca_file": str(material.ca)},
            "basic_auth": {"username": "prometheus", "password": PASSWORD},
        }
    }
    prom = Prometheus(tmp_path / "prom", {"nines": f"127.0.0.1:{server.port}"}, [], None, options)
    try:
        wait_until(lambda: len(scrapes) >= 4, 30, what="four scrapes")
        before = len(scrapes)
        assert server.accepted == 1 and dialed(prom, "nines") == 1  # kept between scrapes
        start = time.monotonic()
        with Flood(server.port, CHURN, duration_s=FLOOD_S + 10, tls=True) as flood:
            time.sleep(FLOOD_S)
        seen = flood.stop()
        during = [t for t in scrapes if start + 1.0 <= t <= start + FLOOD_S]
        window = f"{int(FLOOD_S)}s"
        up = prom.query(f'min_over_time(up{{job="nines"}}[{window}])')
        took = prom.query(f'max_over_time(scrape_duration_seconds{{job="nines"}}[{window}])')
        print(f"\nflood {seen}; scrapes before {before}, during {len(during)}; "
              f"server accepted {server.accepted}, evicted {server.evicted}; Prometheus dialed "
              f"{dialed(prom, 'nines')}, up (min) {up}, scrape duration (max) {took}")  # fmt: skip
        assert seen["peak_open"] >= sum(CHURN.values()) * 0.95, seen  # the flood was real
        assert server.evicted >= sum(CHURN.values()) - ws.MAX_CONNECTIONS
        assert len(during) >= FLOOD_S - 2, during  # Prometheus scraped on through the flood...
        assert float(up[0]["value"][1]) == 1.0, up  # ...each scrape up within its 1 s timeout...
        assert float(took[0]["value"][1]) < 1.0, took
        assert dialed(prom, "nines") == 1  # ...on the connection it had before the flood
    finally:
        prom.close()
        server.close()
