"""A real Prometheus scrapes nines' /metrics over TLS with basic auth (``--web-config-file``).

The web config is Prometheus exporter-toolkit's own format; the certificates come from trustme
(tests/tls_material.py).
A scrape with the right password is up and returns the probe's series; a wrong password and a
plain-HTTP scrape are down, so the protection is real, not decorative.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import bcrypt
import pytest
from e2e_servers import Process, Prometheus, free_port, wait_until
from prometheus_releases import PrometheusRelease
from tls_material import make_tls

pytestmark = pytest.mark.slow

PASSWORD = "scrape-pass-42"


def web_config(tmp_path: Path) -> tuple[Path, Path]:
    """A web config with TLS and one bcrypt user; (its path, the CA that signed the server)."""
    tls = make_tls(tmp_path / "tls")
    hashed = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(rounds=6)).decode()
    path = tmp_path / "web.yml"
    path.write_text(
        f"tls_server_config:\n  cert_file: {tls.cert}\n  key_file: {tls.key}\n"
        f"basic_auth_users:\n  prometheus: '{hashed}'\n"
    )
    return path, tls.ca


def scrape_jobs(target: str, ca: Path) -> tuple[dict[str, str], dict[str, dict[str, object]]]:
    """Three jobs on one target: right credentials, a wrong password, and plain HTTP."""
    tls = {"scheme": "https", "tls_config": {"ca_file": str(ca)}}
    options: dict[str, dict[str, object]] = {
        "good": {**tls, "basic_auth": {"username": "prometheus", "password": PASSWORD}},
        "wrong": {**tls, "basic_auth": {"username": "prometheus", "password": "nope"}},
        "plain": {"basic_auth": {"username": "prometheus", "password": PASSWORD}},
    }
    return {job: target for job in options}, options


def up(prom: Prometheus, job: str) -> float | None:
    result = prom.query(f'up{{job="{job}"}}')
    return float(result[0]["value"][1]) if result else None


def test_prometheus_scrapes_the_probe_over_tls_with_basic_auth(  # type: ignore[no-untyped-def]
    tmp_path: Path, broker, prometheus_release: PrometheusRelease
) -> None:
    config, ca = web_config(tmp_path)
    port = free_port()
    probe = Process(
        [sys.executable, "-m", "monitor", "probe", "--bootstrap", broker.bootstrap,
         "--rate", "20", "--cluster", "tls", "--metrics-port", str(port),
         "--web-config-file", str(config)],
        tmp_path / "probe.log",
    )  # fmt: skip
    targets, options = scrape_jobs(f"127.0.0.1:{port}", ca)
    (tmp_path / "prom").mkdir()
    prom = Prometheus(
        tmp_path / "prom", targets, [], None, scrape_options=options,
        binary=prometheus_release.server,
    )  # fmt: skip
    try:
        wait_until(lambda: up(prom, "good") == 1.0, 60, what="the TLS + basic auth scrape up")
        wait_until(
            lambda: prom.query('nines_probe_sent_total{job="good", cluster="tls"}'),
            30,
            what="the probe's series through TLS",
        )
        wait_until(lambda: up(prom, "wrong") == 0.0, 30, what="a wrong password refused")
        wait_until(lambda: up(prom, "plain") == 0.0, 30, what="plain HTTP refused")
        # the same endpoint refuses a client that skips the credentials
        out = subprocess.run(
            ["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--cacert", str(ca),
             f"https://127.0.0.1:{port}/metrics"],
            capture_output=True, text=True, timeout=30,
        )  # fmt: skip
        assert out.stdout == "401"
    finally:
        prom.close()
        probe.close()
    assert probe.proc.returncode in (0, -15), probe.log.read_text()[-2000:]


def test_prometheus_scrapes_the_stream_exporter_over_tls_with_basic_auth(
    tmp_path: Path, prometheus_release: PrometheusRelease
) -> None:
    """The stream job's /metrics server (the exporter's), with the same web config."""
    from core.hdr import HdrLayout, SparseHistogram
    from core.windows import SeriesKey, WindowHistogram
    from monitor.exporter import LatencyExporter
    from runtime.webconfig import load_web_config

    config, ca = web_config(tmp_path)
    exporter = LatencyExporter()
    hist = SparseHistogram.from_values(HdrLayout(), [1_000, 2_000, 7_500])
    exporter.update(
        [WindowHistogram("10s", 0, 10_000_000, SeriesKey("tls", "t", "0", "e2e"), hist)]
    )
    server = exporter.serve("127.0.0.1", 0, load_web_config(config))
    targets, options = scrape_jobs(f"127.0.0.1:{server.port}", ca)
    (tmp_path / "prom").mkdir()
    prom = Prometheus(
        tmp_path / "prom", targets, [], None, scrape_options=options,
        binary=prometheus_release.server,
    )  # fmt: skip
    try:
        wait_until(lambda: up(prom, "good") == 1.0, 60, what="the TLS + basic auth scrape up")
        got = wait_until(
            lambda: prom.query('nines_latency_max_seconds{job="good", cluster="tls"}'),
            30,
            what="the exporter's series through TLS",
        )
        assert abs(float(got[0]["value"][1]) - 0.0075) < 0.0075 * 1e-3
        wait_until(lambda: up(prom, "wrong") == 0.0, 30, what="a wrong password refused")
        wait_until(lambda: up(prom, "plain") == 0.0, 30, what="plain HTTP refused")
    finally:
        prom.close()
        server.close()
