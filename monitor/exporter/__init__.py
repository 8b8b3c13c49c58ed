"""Prometheus exporter of closed windows: high nines (sample-size gated), exact max, histograms.

Laid out as prometheus_client is: collectors that only update their own state, one renderer that
reads them, and the wire formats apart from the metric contract they write. Quantiles are read
from (merged) histograms only; nothing here averages a quantile.

::

 StreamJob ──update(windows, counters)──▶ LatencyExporter (state.py: the sink; wiring only)
                                                │ under Locks.state, each collector in turn
     ┌──────────────┬───────────────┬───────────┴───────┬──────────────┐
     ▼              ▼               ▼                   ▼              ▼
 SeriesBook     LatestWindows   CumulativeHistograms  Counters       ScrapeGaps
 series.py      latest.py       cumulative.py         counters.py    scrapes.py
 the cap,       a WindowTable   classic le buckets,   echoes, loss,  scrapes later
 rejected,      per resolution  native buckets        job counters,  than the hold
 evicted        (window_rows),  (native.py),          health
                held peaks      each series' lines
                (hold.py)
 generation     a generation    generation            generation     generation
                per resolution
     └──────────────┴───── snapshots (copies, under Locks.state) ──────┘
                                       ▼
                           Renderer (render.py)
   version = the collectors' generations · a chunk per (format, resolution), kept while
   the resolution's generation stands · body parts per format and version · label prefixes
   · Locks: render, then state (checked) · the Prerenderer worker (prerender.py)
          │ encodes with
          ▼
   samples.py   each sample's label prefix encoded once, joined with the window rows' values
     │     │
     ▼     ▼
   text.py  protobuf.py   the two wire formats (core.promproto below the second)
     │     │
     ▼     ▼
   contract.py   every family's name, help, type and labels (what docs/metrics.md lists)

   Renderer.parts(fmt): one call ──▶ runtime.webserver.MetricsServer (gzip by parts, TLS, auth)

``config.py`` holds the exporter's settings. No collector holds the renderer or another
collector; each bumps its own generation on every change it makes, so a body is stale exactly
when the tuple of generations moved. docs/architecture.md tells the rest (locks, peak_hold).
"""

from monitor.exporter.config import ExporterConfig
from monitor.exporter.state import DEFAULT_LE, LatencyExporter
from monitor.exporter.text import CONTENT_TYPE

__all__ = ["CONTENT_TYPE", "DEFAULT_LE", "ExporterConfig", "LatencyExporter"]
