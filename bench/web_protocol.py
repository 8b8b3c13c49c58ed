"""Bench: the CPU of one scrape through the /metrics server with its HTTP layer (the standard
library's ``BaseHTTPRequestHandler`` over a complete head, ``runtime.webhttp``) against the
same server answering through ``h11`` (a sans-I/O HTTP/1.1 library), and whether the answers
are the same bytes.

``python -m bench.web_protocol [--requests 2000] [--runs 5] [--save]``: per run a server in this
process and one client process that sends ``--requests`` keep-alive GETs of /metrics on one
connection (gzip accepted, as Prometheus asks); the server's CPU is this process's CPU time over
the run (the client's is its own). The two layers run in turn, ``--runs`` times each; the
medians go to ``bench/results/web_protocol.json``. ``--flood-runs N`` also runs
``tests/metrics_flood.py`` (plain: 550 idle and 550 trickling connections; TLS: 400 idle, 300
trickling, 400 mid-handshake) against each layer in turn, N times, and keeps its summaries.
"""

from __future__ import annotations

import argparse
import email.utils
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from http import HTTPStatus
from pathlib import Path
from typing import Any

import h11

from runtime.webhttp import Exchange, Outcome, accepts_gzip
from runtime.webserver import HEALTH_PATHS, MetricsServer, route

#: A probe-sized text body (~30 KB, 300 series): what a scrape of ``nines probe`` renders.
BODY = b"".join(
    b'# HELP nines_x_%d x\n# TYPE nines_x_%d gauge\nnines_x_%d{partition="%d"} %d.5\n'
    % (i, i, i, i % 12, i)
    for i in range(300)
)
HEAD = (
    b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: Prometheus/2.42.0\r\n"
    b"Accept: text/plain;version=0.0.4;q=1,*/*;q=0.1\r\nAccept-Encoding: gzip\r\n"
    b"X-Prometheus-Scrape-Timeout-Seconds: 10\r\n\r\n"
)
CLIENT = """
import socket, sys, time
port, n, head = int(sys.argv[1]), int(sys.argv[2]), bytes.fromhex(sys.argv[3])
import http.client
c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
c.connect()
t0 = time.perf_counter()
for _ in range(n):
    c.sock.sendall(head)
    r = http.client.HTTPResponse(c.sock, method="GET")
    r.begin()
    assert r.status == 200, r.status
    r.read()
print(time.perf_counter() - t0)
"""


class H11Server(MetricsServer):
    """The same server, its requests answered through h11 (the /metrics and health paths)."""

    def handle(self, addr: Any, head: bytes) -> Outcome:
        conn = h11.Connection(h11.SERVER)
        conn.receive_data(head)
        try:
            request = conn.next_event()
        except h11.RemoteProtocolError:
            return [b"HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n"], False, False
        assert isinstance(request, h11.Request)
        headers = {name.lower(): value for name, value in request.headers}
        has_body = b"content-length" in headers or b"transfer-encoding" in headers
        common = [
            (b"Server", f"{Exchange.server_version} {Exchange.sys_version}".encode()),
            (b"Date", email.utils.formatdate(usegmt=True).encode()),
        ]
        path = route(request.target.decode("latin-1"))
        if path in HEALTH_PATHS or path is None:
            text = b"OK\n" if path else b"Not found: the metrics are at /metrics\n"
            status = 200 if path else 404
            parts = [
                conn.send(
                    h11.Response(
                        status_code=status,
                        reason=HTTPStatus(status).phrase.encode(),
                        headers=[
                            *common,
                            (b"Content-Type", b"text/plain; charset=utf-8"),
                            (b"Content-Length", str(len(text)).encode()),
                        ],
                    )
                )
                or b"",
                conn.send(h11.Data(data=text)) or b"",
            ]
        else:
            gzipped = accepts_gzip(headers.get(b"accept-encoding", b"").decode("latin-1"))
            fields = [*common, (b"Content-Type", self._content_type.encode())]
            if gzipped:
                fields.append((b"Content-Encoding", b"gzip"))
            if request.method == b"HEAD":  # the headers a GET gets, no render, no length
                head_only = h11.Response(status_code=200, reason=b"OK", headers=fields)
                parts = [conn.send(head_only) or b"", conn.send(h11.EndOfMessage()) or b""]
                return [p for p in parts if p], conn.our_state is h11.DONE, has_body
            data = self._render(self._body)
            if data is not None and gzipped:
                data = self._gzip(data, self._content_type)
            assert data is not None
            body = (data,) if isinstance(data, bytes) else tuple(data)
            fields.append((b"Content-Length", str(sum(len(p) for p in body)).encode()))
            response = h11.Response(status_code=200, reason=b"OK", headers=fields)
            parts = [conn.send(response) or b""]
            for part in body:
                parts.extend(conn.send_with_data_passthrough(h11.Data(data=part)) or [])
        parts.append(conn.send(h11.EndOfMessage()) or b"")
        keep = conn.our_state is h11.DONE and not has_body
        return [bytes(p) for p in parts if p], keep, has_body


def one_run(server_class: type[MetricsServer], requests: int) -> dict[str, float]:
    """A server, one client process sending ``requests`` keep-alive scrapes: the server's CPU."""
    server = server_class(lambda: BODY, "127.0.0.1", 0)
    try:
        args = [sys.executable, "-c", CLIENT, str(server.port)]
        subprocess.run([*args, "50", HEAD.hex()], check=True, capture_output=True)  # warm-up
        cpu0, wall0 = time.process_time(), time.perf_counter()
        out = subprocess.run([*args, str(requests), HEAD.hex()], check=True, capture_output=True)
        cpu = time.process_time() - cpu0
        wall = time.perf_counter() - wall0
    finally:
        server.close()
    return {
        "cpu_us_per_request": cpu / requests * 1e6,
        "wall_us_per_request": float(out.stdout) / requests * 1e6,
        "run_s": wall,
    }


def same_bytes() -> dict[str, bool]:
    """Whether the two layers answer each request with the same bytes (the Date fixed)."""
    heads = {
        "GET /metrics, gzip": HEAD,
        "GET /metrics, HTTP/1.0": b"GET /metrics HTTP/1.0\r\n\r\n",
        "GET /-/healthy": b"GET /-/healthy HTTP/1.1\r\nHost: x\r\n\r\n",
        "GET /nope": b"GET /nope HTTP/1.1\r\nHost: x\r\n\r\n",
        "Connection: close": b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        "HEAD /metrics": b"HEAD /metrics HTTP/1.1\r\nHost: x\r\n\r\n",
        "HTTP/1.0 keep-alive": b"GET /metrics HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
        "a request with a body": b"GET /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\n",
        "POST": b"POST /metrics HTTP/1.1\r\nHost: x\r\n\r\n",
        "a malformed request line": b"GARBAGE\r\n\r\n",
    }
    fixed = "Sun, 29 Nov 2026 08:00:00 GMT"
    saved = Exchange.date_time_string, email.utils.formatdate
    Exchange.date_time_string = lambda self, timestamp=None: fixed  # type: ignore[method-assign]
    email.utils.formatdate = lambda *a, **k: fixed  # type: ignore[assignment]
    std, other = (
        MetricsServer(lambda: BODY, "127.0.0.1", 0),
        H11Server(lambda: BODY, "127.0.0.1", 0),
    )
    try:
        same = {}
        for name, head in heads.items():
            try:
                theirs = b"".join(other.handle(("127.0.0.1", 1), head)[0])
            except h11.ProtocolError:
                theirs = b""
            same[name] = b"".join(std.handle(("127.0.0.1", 1), head)[0]) == theirs
        return same
    finally:
        Exchange.date_time_string, email.utils.formatdate = saved  # type: ignore[method-assign]
        std.close()
        other.close()


def layer_only(n: int = 20000) -> dict[str, float]:
    """µs per request of each layer alone, in this thread: the head in, the answer out (the
    body cached and compressed once, as the server keeps it)."""
    out = {}
    for name, cls in (("stdlib", MetricsServer), ("h11", H11Server)):
        server = cls(lambda: BODY, "127.0.0.1", 0)
        try:
            server.handle(("127.0.0.1", 1), HEAD)
            t0 = time.thread_time()
            for _ in range(n):
                server.handle(("127.0.0.1", 1), HEAD)
            out[name] = (time.thread_time() - t0) / n * 1e6
        finally:
            server.close()
    return out


ROOT = Path(__file__).resolve().parent.parent
FLOODS = {
    "plain": ["--idle", "550", "--trickle", "550"],
    "tls": ["--idle", "400", "--trickle", "300", "--hello", "400"],
}
#: ``tests/metrics_flood.py`` with this module's h11 server in place of the server's class
FLOOD = """
import runpy, sys
if sys.argv[1] == "h11":
    import runtime.webserver as ws
    from bench.web_protocol import H11Server
    ws.MetricsServer = H11Server
sys.argv = ["tests/metrics_flood.py", *sys.argv[2:]]
sys.path.insert(0, "tests")
runpy.run_path("tests/metrics_flood.py", run_name="__main__")
"""
_SCRAPES = re.compile(
    r"(fresh|kept) scrapes: (\d+)/(\d+) answered(?:, median ([\d.]+) ms, max ([\d.]+) ms)?"
)
_CPU = re.compile(r"server and scrapers ([\d.]+), flood ([\d.]+); load ([\d.]+)")


def flood_run(layer: str, mode: str, seconds: float, tls_dir: Path) -> dict[str, Any]:
    """One ``tests/metrics_flood.py`` run against ``layer``: its scrapes, CPU and load."""
    flags = [*FLOODS[mode], *(["--tls", str(tls_dir)] if mode == "tls" else [])]
    out = subprocess.run(
        [sys.executable, "-c", FLOOD, layer, "--seconds", f"{seconds:g}", *flags],
        capture_output=True, text=True, cwd=ROOT, check=False, timeout=seconds + 120,
    ).stdout  # fmt: skip
    row: dict[str, Any] = {"layer": layer, "mode": mode}
    for kind, ok, n, median, top in _SCRAPES.findall(out):
        row[kind] = {"answered": int(ok), "of": int(n), "median_ms": median, "max_ms": top}
    cpu = _CPU.search(out)
    if cpu:
        row["server_cpu"], row["flood_cpu"], row["load"] = (float(v) for v in cpu.groups())
    return row


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--requests", type=int, default=2000)
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--flood-runs", type=int, default=0)
    p.add_argument("--flood-seconds", type=float, default=10.0)
    p.add_argument("--save", action="store_true")
    args = p.parse_args()
    load0 = Path("/proc/loadavg").read_text().split()[:3]
    runs: dict[str, list[dict[str, float]]] = {"stdlib": [], "h11": []}
    for _ in range(args.runs):  # in turn, so that both see the same machine
        runs["stdlib"].append(one_run(MetricsServer, args.requests))
        runs["h11"].append(one_run(H11Server, args.requests))
    result: dict[str, Any] = {
        "requests": args.requests,
        "runs": args.runs,
        "load_before": load0,
        "load_after": Path("/proc/loadavg").read_text().split()[:3],
        "nice": os.nice(0),
        "layer_only_us": layer_only(),
        "same_bytes": same_bytes(),
    }
    for name, rs in runs.items():
        result[name] = {
            "cpu_us_per_request_median": statistics.median(r["cpu_us_per_request"] for r in rs),
            "wall_us_per_request_median": statistics.median(r["wall_us_per_request"] for r in rs),
            "cpu_us_per_request": [round(r["cpu_us_per_request"], 1) for r in rs],
        }
    floods = []
    for _ in range(args.flood_runs):
        for layer in ("stdlib", "h11"):
            for mode in FLOODS:
                with tempfile.TemporaryDirectory() as tls_dir:
                    floods.append(flood_run(layer, mode, args.flood_seconds, Path(tls_dir)))
    if floods:
        result["flood"] = {"seconds": args.flood_seconds, "runs": floods}
    print(json.dumps(result, indent=2))
    if args.save:
        from bench.machine import write_result

        write_result("web_protocol", result)


if __name__ == "__main__":
    main()
