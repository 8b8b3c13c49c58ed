"""Real Prometheus and Alertmanager processes on loopback, and a webhook receiver to catch pages."""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml
from prometheus_releases import major_of
from real_components import require_tool

from testbroker.ports import free_port

PROMETHEUS = shutil.which("prometheus")
#: How each major version turns native histograms on: 2.x by a feature flag (a no-op on 3.x),
#: 3.8 and later by ``scrape_native_histograms`` in the scrape config (docs/metrics.md).
NATIVE_FLAG_2X = "--enable-feature=native-histograms"


ALERTMANAGER = shutil.which("prometheus-alertmanager") or shutil.which("alertmanager")


def http_json(url: str, timeout_s: float = 5) -> Any:
    """GET ``url`` and decode JSON."""
    with urllib.request.urlopen(url, timeout=timeout_s) as resp:
        return json.loads(resp.read())


def wait_until(predicate, timeout_s: float, interval_s: float = 0.5, what: str = "condition"):  # type: ignore[no-untyped-def]
    """Poll ``predicate`` until it returns something truthy; fail with ``what`` on timeout."""
    deadline = time.monotonic() + timeout_s
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = predicate()
        except (OSError, ValueError) as exc:
            last = exc
        if last and not isinstance(last, Exception):
            return last
        time.sleep(interval_s)
    raise AssertionError(f"timed out after {timeout_s:.0f}s waiting for {what} (last: {last!r})")


class Webhook:
    """An Alertmanager webhook receiver that records every notification."""

    def __init__(self) -> None:
        self.notifications: list[dict[str, Any]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                outer.notifications.append(json.loads(body))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def alerts(self, status: str | None = None) -> list[dict[str, Any]]:
        """Every alert in every notification so far (optionally only firing/resolved)."""
        out = [a for n in self.notifications for a in n.get("alerts", [])]
        return [a for a in out if status is None or a.get("status") == status]

    def close(self) -> None:
        self.server.shutdown()


class Process:
    """A server process with its log file; stopped on close."""

    def __init__(self, cmd: list[str], log: Path) -> None:
        self.log = log
        self._fh = log.open("wb")
        self.proc = subprocess.Popen(cmd, stdout=self._fh, stderr=subprocess.STDOUT)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self._fh.close()


class Prometheus(Process):
    """A real Prometheus: scrapes loopback targets and evaluates rules every second."""

    def __init__(
        self,
        workdir: Path,
        targets: dict[str, str],
        rule_files: list[Path],
        alertmanager: str | None,
        scrape_options: dict[str, dict[str, Any]] | None = None,
        flags: tuple[str, ...] = (),
        native_histograms: bool = False,
        binary: str | None = None,
    ) -> None:
        """``scrape_options``: job → extra scrape_config keys (scheme, tls_config, basic_auth);
        ``flags``: more command-line flags; ``native_histograms``: ingest them, as this
        ``binary``'s major version wants it (default: the ``prometheus`` on PATH)."""
        binary = binary or PROMETHEUS or "prometheus"
        self.major = major_of(binary)
        native_scrape: dict[str, Any] = {}
        if native_histograms and self.major >= 3:
            native_scrape = {"scrape_native_histograms": True}
        elif native_histograms:
            flags = (*flags, NATIVE_FLAG_2X)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config: dict[str, Any] = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": [str(p) for p in rule_files],
            "scrape_configs": [
                {
                    "job_name": job,
                    "static_configs": [{"targets": [target]}],
                    **native_scrape,
                    **(scrape_options or {}).get(job, {}),
                }
                for job, target in targets.items()
            ],
        }
        if alertmanager:
            config["alerting"] = {
                "alertmanagers": [{"static_configs": [{"targets": [alertmanager]}]}]
            }
        cfg = workdir / "prometheus.yml"
        cfg.write_text(yaml.safe_dump(config))
        super().__init__(
            [
                binary,
                f"--config.file={cfg}",
                f"--storage.tsdb.path={workdir / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                *flags,
            ],
            workdir / "prometheus.log",
        )
        wait_until(
            lambda: urllib.request.urlopen(self.url + "/-/ready", timeout=2).status == 200,
            30,
            what="prometheus ready",
        )

    def query(self, expr: str) -> list[dict[str, Any]]:
        """Instant query; the result vector (or matrix)."""
        url = self.url + "/api/v1/query?" + urllib.parse.urlencode({"query": expr})
        data = http_json(url)
        if data["status"] != "success":
            raise AssertionError(f"query failed: {expr}: {data}")
        return list(data["data"]["result"])


class Alertmanager(Process):
    """A real Alertmanager that sends every group (firing and resolved) to a webhook at once."""

    def __init__(self, workdir: Path, webhook_url: str) -> None:
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        config = {
            "route": {
                "receiver": "test",
                "group_by": ["alertname"],
                "group_wait": "1s",
                "group_interval": "1s",
                "repeat_interval": "1h",
            },
            "receivers": [
                {"name": "test", "webhook_configs": [{"url": webhook_url, "send_resolved": True}]}
            ],
        }
        cfg = workdir / "alertmanager.yml"
        cfg.write_text(yaml.safe_dump(config))
        super().__init__(
            [
                ALERTMANAGER or "alertmanager",
                f"--config.file={cfg}",
                f"--storage.path={workdir / 'am'}",
                f"--web.listen-address={self.address}",
                "--cluster.listen-address=",
            ],
            workdir / "alertmanager.log",
        )
        wait_until(
            lambda: (
                urllib.request.urlopen(f"http://{self.address}/-/ready", timeout=2).status == 200
            ),
            30,
            what="alertmanager ready",
        )


def require_prometheus() -> None:
    """Skip with the fix when the Debian packages are missing (`make test` installs them)."""
    install = "apt-get install prometheus prometheus-alertmanager; `make test` does this as root"
    if not PROMETHEUS:
        require_tool("prometheus", install)
    if not ALERTMANAGER:
        require_tool("prometheus-alertmanager", install)
