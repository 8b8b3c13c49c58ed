"""Prometheus exporter of closed windows: high nines (sample-size gated), exact max, histograms.

Laid out as prometheus_client is: ``config`` (the exporter's settings), ``state`` (the latest
windows, cumulative counters and buckets), ``exposition`` (the text and protobuf formats),
``native`` (HDR buckets re-binned to a native histogram); /metrics is served over HTTP by
``runtime.webserver`` (the probe's server too),
``prerender`` (the worker that encodes and gzips the coarse resolutions before the scrape).
Quantiles are read from (merged) histograms only; nothing here averages a quantile.
"""

from monitor.exporter.config import ExporterConfig
from monitor.exporter.exposition import CONTENT_TYPE
from monitor.exporter.state import DEFAULT_LE, LatencyExporter

__all__ = ["CONTENT_TYPE", "DEFAULT_LE", "ExporterConfig", "LatencyExporter"]
