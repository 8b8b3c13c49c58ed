"""Prometheus exporter of closed windows: high nines (sample-size gated), exact max, histograms.

Laid out as prometheus_client is: collectors that only update their own state (``series``: the
series cap; ``latest``: each series' latest window and held peaks, in per-resolution ``table``s;
``cumulative``: classic and native histograms; ``counters``: counters and health; ``scrapes``:
scrape gaps), one renderer that reads them (``render``: versions, locks, caches, the
``prerender`` worker), the text and protobuf formats (``exposition``, ``native``), the settings
(``config``), and ``state``'s ``LatencyExporter``, the job's sink that wires them and hands the
renderer to ``runtime.webserver``. Quantiles are read from (merged) histograms only; nothing
here averages a quantile.
"""

from monitor.exporter.config import ExporterConfig
from monitor.exporter.exposition import CONTENT_TYPE
from monitor.exporter.state import DEFAULT_LE, LatencyExporter

__all__ = ["CONTENT_TYPE", "DEFAULT_LE", "ExporterConfig", "LatencyExporter"]
