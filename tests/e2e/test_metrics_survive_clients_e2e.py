"""A real probe's /metrics (TLS and basic auth) outlives hostile clients: while idle, trickling
(slowloris) and flooding clients hold connections open, a real Prometheus scraping every second
with a one-second timeout (stricter than its default ten) misses no scrape, and SIGTERM still
ends the probe promptly. Everything on loopback; every hostile loop is bounded in time and count.
"""

from __future__ import annotations

import base64
import signal
import socket
import ssl
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import bcrypt
import pytest
from e2e_servers import Process, Prometheus, free_port, wait_until
from real_components import require_tool
from tls_material import make_tls

pytestmark = pytest.mark.slow

PASSWORD = "scrape-pass-42"
IDLE, SLOW, FLOOD, GUESS = 20, 10, 4, 2  # clients of each kind, 36 in all (cap: 64)
HOSTILE_S = 20.0  # how long the clients are held before SIGTERM
SIGTERM_BOUND_S = 10.0


class Hostile:
    """Client threads on one target, each looping until ``stop`` or a hard deadline."""

    def __init__(self, port: int, ca: Path) -> None:
        self.port = port
        self.ctx = ssl.create_default_context(cafile=str(ca))
        self.stop = threading.Event()
        self.deadline = time.monotonic() + HOSTILE_S + SIGTERM_BOUND_S + 30
        self.seen: Counter[str] = Counter()
        self._lock = threading.Lock()
        self.threads: list[threading.Thread] = []

    def count(self, what: str) -> None:
        with self._lock:
            self.seen[what] += 1

    def running(self) -> bool:
        return not self.stop.is_set() and time.monotonic() < self.deadline

    def start(self, kind: Callable[[], None], n: int) -> None:
        for _ in range(n):
            t = threading.Thread(target=self._loop, args=(kind,), daemon=True)
            t.start()
            self.threads.append(t)

    def _loop(self, kind: Callable[[], None]) -> None:
        for _ in range(100_000):  # bounded in count as well as time
            if not self.running():
                return
            try:
                kind()
            except OSError:
                self.count("errors")
                time.sleep(0.05)

    def connect(self) -> socket.socket:
        return socket.create_connection(("127.0.0.1", self.port), timeout=30)

    def idle(self) -> None:
        """Connect, send nothing, wait to be cut (the TLS handshake never starts)."""
        with self.connect() as sock:
            self._wait_cut(sock)
            self.count("idle_cut")

    def slowloris(self) -> None:
        """Handshake, then trickle a request head a byte every 0.3 s, never ending it."""
        with self.ctx.wrap_socket(self.connect(), server_hostname="127.0.0.1") as sock:
            head = b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 1000
            for byte in head:
                if not self.running():
                    return
                try:
                    sock.send(bytes([byte]))
                except OSError:
                    break
                time.sleep(0.3)
            self.count("slow_cut")

    def flood(self, password: str) -> Callable[[], None]:
        """Full GETs as fast as the server answers (a wrong ``password``: bcrypt every time)."""
        token = base64.b64encode(f"prometheus:{password}".encode()).decode()
        request = (
            f"GET /metrics HTTP/1.1\r\nHost: x\r\nAuthorization: Basic {token}\r\n"
            "Accept-Encoding: gzip\r\nConnection: close\r\n\r\n"
        ).encode()

        def one() -> None:
            with self.ctx.wrap_socket(self.connect(), server_hostname="127.0.0.1") as sock:
                sock.sendall(request)
                answer = b""
                while chunk := sock.recv(65536):
                    answer += chunk
                self.count(answer[9:12].decode() or "empty")

        return one

    def _wait_cut(self, sock: socket.socket) -> None:
        sock.settimeout(0.5)
        while self.running():
            try:
                if not sock.recv(1):
                    return
            except TimeoutError:
                continue
            except OSError:
                return

    def close(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(5)


def test_prometheus_is_served_and_sigterm_is_prompt_under_hostile_clients(
    tmp_path: Path,
    broker,  # type: ignore[no-untyped-def]
) -> None:
    require_tool("prometheus", "apt-get install prometheus")  # no Alertmanager needed here
    tls = make_tls(tmp_path / "tls")
    hashed = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(rounds=10)).decode()
    web = tmp_path / "web.yml"
    web.write_text(
        f"tls_server_config:\n  cert_file: {tls.cert}\n  key_file: {tls.key}\n"
        f"basic_auth_users:\n  prometheus: '{hashed}'\n"
    )
    port = free_port()
    probe = Process(
        [sys.executable, "-m", "monitor", "probe", "--bootstrap", broker.bootstrap,
         "--rate", "20", "--cluster", "hostile", "--metrics-port", str(port),
         "--web-config-file", str(web)],
        tmp_path / "probe.log",
    )  # fmt: skip
    hostile = Hostile(port, tls.ca)
    prom: Prometheus | None = None
    try:
        wait_until(lambda: socket.create_connection(("127.0.0.1", port), 1).close() or True, 60,
                   what="the probe's /metrics listening")  # fmt: skip
        hostile.start(hostile.idle, IDLE)
        hostile.start(hostile.slowloris, SLOW)
        hostile.start(hostile.flood(PASSWORD), FLOOD)
        hostile.start(hostile.flood("a wrong guess"), GUESS)
        (tmp_path / "prom").mkdir()
        scrape = {
            "scheme": "https",
            "tls_config": {"ca_file": str(tls.ca)},
            "basic_auth": {"username": "prometheus", "password": PASSWORD},
            "scrape_interval": "1s",
            "scrape_timeout": "1s",
        }
        prom = Prometheus(
            tmp_path / "prom", {"probe": f"127.0.0.1:{port}"}, [], None, {"probe": scrape}
        )
        started = time.monotonic()
        wait_until(lambda: prom.query('up{job="probe"} == 1'), 30, what="the first scrape up")
        time.sleep(max(0.0, HOSTILE_S - (time.monotonic() - started)))
        window = f"{int(HOSTILE_S) - 5}s"
        scrapes = float(prom.query(f'count_over_time(up{{job="probe"}}[{window}])')[0]["value"][1])
        good = float(prom.query(f'sum_over_time(up{{job="probe"}}[{window}])')[0]["value"][1])
        slowest = float(
            prom.query(f'max_over_time(scrape_duration_seconds{{job="probe"}}[{window}])')[0][
                "value"
            ][1]
        )
        series = prom.query('nines_probe_sent_total{job="probe", cluster="hostile"}')
        seen = dict(hostile.seen)
        print(f"scrapes {scrapes:.0f}, up {good:.0f}, slowest {slowest:.3f} s, clients {seen}")
        assert scrapes >= 10 and good == scrapes, (scrapes, good, seen)
        assert slowest < 1.0
        assert series, "the probe's series through TLS while under load"
        # the hostile clients were real: cut at their deadlines, and the flood was answered
        assert seen.get("idle_cut", 0) >= IDLE and seen.get("slow_cut", 0) >= SLOW, seen
        assert seen.get("200", 0) >= 100 and seen.get("401", 0) >= 10, seen

        # SIGTERM with every kind of hostile client still connected
        sent = time.monotonic()
        probe.proc.send_signal(signal.SIGTERM)
        code = probe.proc.wait(SIGTERM_BOUND_S)
        took = time.monotonic() - sent
        print(f"SIGTERM to exit: {took:.2f} s")
        assert code == 0, probe.log.read_text()[-2000:]
    finally:
        hostile.close()
        if prom is not None:
            prom.close()
        probe.close()
    assert "Traceback" not in probe.log.read_text()
