"""The /metrics HTTP server: serves a body callable, gzipped when the scraper accepts it.

Not prometheus_client's ``start_http_server``: that one renders a registry's families on every
scrape (and answers OpenMetrics when Prometheus asks for it), while ours serves the exporter's
joined text-format body as is (see ``exposition``), gzipped at ``GZIP_LEVEL``.
"""

from __future__ import annotations

import gzip
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from core.webconfig import READY_PATH, UNAUTHORIZED_HEADERS, WebConfig
from monitor.exporter.exposition import CONTENT_TYPE

#: zlib level of gzipped scrapes. At 10,000 probe partitions (70 MB of text) level 1 sends
#: 5.2 MB in 0.21 s of CPU, level 4 4.5 MB in 0.37 s, level 6 4.0 MB in 0.74 s: level 4 keeps the
#: scrape under 5 MB and 0.5 s (bench.cardinality, docs/benchmarks.md).
GZIP_LEVEL = 4


class MetricsServer:
    """A running /metrics HTTP server (gzip when the scraper accepts it); ``close()`` stops it.

    With a web config (``--web-config-file``) it serves over TLS and/or behind basic auth.
    ``on_scrape`` hears the address of each authorized scraper before its body is rendered.
    """

    def __init__(
        self,
        body: Callable[[], bytes],
        host: str,
        port: int,
        web: WebConfig | None = None,
        on_scrape: Callable[[str], None] | None = None,
    ) -> None:
        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path == READY_PATH:
                    self.send_response(200)
                    self.send_header("Content-Length", "6")
                    self.end_headers()
                    self.wfile.write(b"ready\n")
                    return
                if web is not None and not web.authorized(self.headers.get("Authorization")):
                    self.send_response(401)
                    for name, value in UNAUTHORIZED_HEADERS:
                        self.send_header(name, value)
                    self.send_header("Content-Length", "13")
                    self.end_headers()
                    self.wfile.write(b"Unauthorized\n")
                    return
                if on_scrape is not None:
                    on_scrape(self.client_address[0])
                data = body()
                gzipped = "gzip" in self.headers.get("Accept-Encoding", "")
                if gzipped:
                    data = gzip.compress(data, compresslevel=GZIP_LEVEL)
                self.send_response(200)
                self.send_header("Content-Type", CONTENT_TYPE)
                if gzipped:
                    self.send_header("Content-Encoding", "gzip")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *_: Any) -> None:  # scrapes are not log lines
                pass

        self._server = ThreadingHTTPServer((host, port), Handler)
        self._server.daemon_threads = True
        ctx = web.ssl_context() if web is not None else None
        if ctx is not None:
            self._server.socket = ctx.wrap_socket(self._server.socket, server_side=True)
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="nines-metrics", daemon=True
        )
        self._thread.start()
        self.host = host
        self.port = int(self._server.server_address[1])

    def close(self) -> None:
        """Stop serving."""
        self._server.shutdown()
        self._server.server_close()
