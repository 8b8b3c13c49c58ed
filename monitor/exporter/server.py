"""The exporter's /metrics server: ``runtime.webserver``'s, the one the probe serves with too.

It serves the exporter's joined text-format body as is (see ``exposition``), or its protobuf
body to a scraper that asks for it, gzipped; an unchanged body (``LatencyExporter.exposition``
and ``exposition_protobuf`` return the same bytes until something changes) is rendered and
compressed once however many scrapers ask.
"""

from __future__ import annotations

from runtime.webserver import GZIP_LEVEL, PROTOBUF_GZIP_LEVEL, MetricsServer

__all__ = ["GZIP_LEVEL", "PROTOBUF_GZIP_LEVEL", "MetricsServer"]
