"""Reading an exporter as tests and benches do: whole bodies, the pre-render worker, bounds."""

from __future__ import annotations

from collections.abc import Hashable

from monitor.exporter.hold import PeakHold
from monitor.exporter.render import PROTOBUF, TEXT
from monitor.exporter.state import LatencyExporter


def text_body(exp: LatencyExporter) -> bytes:
    """The whole /metrics body in the Prometheus text format (what the server sends, joined)."""
    return b"".join(exp.exposition_parts(TEXT))


def protobuf_body(exp: LatencyExporter) -> bytes:
    """The whole body as delimited protobuf MetricFamily messages, joined."""
    return b"".join(exp.exposition_parts(PROTOBUF))


def wait_prerendered(exp: LatencyExporter, timeout_s: float = 60.0) -> bool:
    """Whether the pre-render worker is idle within ``timeout_s`` (its CPU is then counted with
    the update that made the work, never hidden in a scrape's)."""
    worker = exp.renderer.prerenderer
    return worker is None or worker.wait(timeout_s)


def prerender_cpu_s(exp: LatencyExporter) -> float:
    """CPU seconds the pre-render worker has spent so far."""
    worker = exp.renderer.prerenderer
    return 0.0 if worker is None else worker.cpu_s


def peak_sizes(hold: PeakHold[Hashable]) -> tuple[int, int, int]:
    """Keys held, the most entries of one key, and expiries scheduled (for bounds tests)."""
    held = hold._held
    most = max((len(h) for h in held.values()), default=0)
    return len(held), most, len(hold._due)
