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


def over(prom: Prometheus, fn: str, metric: str, window_s: int) -> float:
    """``fn`` (``min_over_time``...) of ``metric`` of the job over the last ``window_s`` (NaN:
    no sample yet)."""
    result = prom.query(f'{fn}({metric}{{job="nines"}}[{window_s}s])')
    return float(result[0]["value"][1]) if result else float("nan")


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
        wait_until(lambda: over(prom, "sum_over_time", "up", 60) >= 4, 30, what="4 scrapes up")
        assert server.accepted == 1 and dialed(prom, "nines") == 1  # kept between scrapes
        with Flood(server.port, CHURN, duration_s=FLOOD_S + 10, tls=True) as flood:
            time.sleep(FLOOD_S)
            window = int(FLOOD_S) - 1  # the flood's last seconds, all of it open
            scrapes = over(prom, "count_over_time", "up", window)
            up = over(prom, "min_over_time", "up", window)
            took = over(prom, "max_over_time", "scrape_duration_seconds", window)
        seen = flood.stop()
        print(f"\nflood {seen}; in its last {window} s Prometheus scraped {scrapes} times, up "
              f"(min) {up}, scrape duration (max) {took:.3f} s; server accepted "
              f"{server.accepted}, evicted {server.evicted}; Prometheus dialed "
              f"{dialed(prom, 'nines')}")  # fmt: skip
        assert seen["peak_open"] >= sum(CHURN.values()) * 0.95, seen  # the flood was real
        assert server.evicted >= sum(CHURN.values()) - ws.MAX_CONNECTIONS
        assert scrapes >= window - 1  # Prometheus scraped on through the flood...
        assert up == 1.0 and took < 1.0  # ...each scrape up within its 1 s timeout...
        assert dialed(prom, "nines") == 1  # ...on the connection it had before the flood
    finally:
        prom.close()
        server.close()
