"""The stream stage composed with the exporter: ``nines stream`` and the demo run the job this way.

The Spark job knows no exporter: it hands closed windows, counters and pipeline health to a
``streaming.sink.WindowSink``. Here the exporter becomes that sink and /metrics is served.
Spark and the exporter are imported only when a pipeline is built, so ``nines --help`` stays fast.
"""

from __future__ import annotations

import argparse
import logging
import threading
from typing import TYPE_CHECKING, Any

from monitor.exporter.config import ExporterConfig
from streaming.config import StreamConfig

if TYPE_CHECKING:
    from core.windows import WindowHistogram
    from monitor.exporter import LatencyExporter
    from runtime.webserver import MetricsServer
    from streaming.job import BatchCallback, SourceFactory

log = logging.getLogger("nines.stream")


class PipelineConfig(StreamConfig, ExporterConfig):
    """The ``stream:`` section: the Spark job's settings and the exporter's, each key once.

    ``max_series`` comes from their common base: it caps Spark's state and /metrics alike.
    """


class StreamPipeline:
    """A ``StreamJob`` whose sink is a ``LatencyExporter``, with its /metrics server."""

    def __init__(
        self,
        config: PipelineConfig,
        spark: Any = None,
        on_batch: BatchCallback | None = None,
        source: SourceFactory | None = None,
    ) -> None:
        from monitor.exporter import LatencyExporter
        from streaming.job import StreamJob

        self.config = config
        self.exporter: LatencyExporter = LatencyExporter(config, windows=config.spec)
        self.job = StreamJob(config, spark, on_batch, source, sink=self.exporter)
        self.server: MetricsServer | None = None

    @property
    def metrics_port(self) -> int | None:
        """The port /metrics is served on (None before ``start``)."""
        return self.server.port if self.server else None

    @property
    def query(self) -> Any:
        """The job's Spark streaming query (None before ``start``)."""
        return self.job.query

    def start(self, serve: bool = True) -> StreamPipeline:
        """Serve /metrics (unless ``serve`` is false), then start the job."""
        if serve:
            from runtime.webconfig import load_web_config

            web = load_web_config(self.config.web_config_file)
            self.server = self.exporter.serve(web=web)
        try:
            self.job.start()
        except BaseException:
            self._close_server()
            raise
        return self

    def latest_windows(self) -> dict[str, list[WindowHistogram]]:
        """Resolution → the latest closed window of each series (for live views)."""
        return self.exporter.latest_windows()

    def stop(self) -> None:
        """Stop the query and the metrics server."""
        self.job.stop()
        self._close_server()

    def _close_server(self) -> None:
        if self.server is not None:
            self.server.close()
            self.server = None


def run_stream(config: PipelineConfig) -> int:
    """Run until SIGTERM/SIGINT (exit 0) or until the query fails (exit 1)."""
    import signal

    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    pipeline = StreamPipeline(config).start()
    log.info("nines stream: /metrics on %s:%s", config.metrics_host, pipeline.metrics_port)
    try:
        while not stop.is_set():
            if not pipeline.query.isActive:
                hint = (
                    f"Spark's log: {config.spark_log}"
                    if config.spark_log
                    else "--spark-log FILE keeps Spark's traces"
                )
                log.error("the query stopped: %s (%s)", pipeline.job.failure(), hint)
                return 1
            stop.wait(0.5)
    finally:
        pipeline.stop()
    return 0


#: The exporter's settings that are ``nines stream`` flags too.
EXPORTER_FLAGS = ("metrics_port", "metrics_host", "web_config_file")


def flags() -> tuple[str, ...]:
    """``nines stream``'s flags in --help's order: the job's, the exporter's after the archive."""
    from streaming.cli import FLAGS

    at = FLAGS.index("archive") + 1
    return (*FLAGS[:at], *EXPORTER_FLAGS, *FLAGS[at:])


def check_exporter(config: ExporterConfig) -> None:
    """Before any connection: a taken port, or a bad web config file or certificate, exits 2."""
    from runtime.config_io import check_port_free
    from runtime.webconfig import load_web_config

    check_port_free(config.metrics_host, config.metrics_port)
    load_web_config(config.web_config_file)


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add ``nines stream``: the stream stage's flags and the exporter's, run here with the
    exporter wired in."""
    from streaming.cli import add_parser

    add_parser(sub, PipelineConfig, flags()).set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Validate the configuration, check the cluster, and run the pipeline."""
    from runtime.fdlimit import raise_open_files_limit
    from streaming.cli import stream_config

    raise_open_files_limit()  # /metrics connections and Kafka sockets: as Go programs do
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    config = stream_config(args, PipelineConfig, flags(), checks=[check_exporter])
    return run_stream(config)  # Spark: only once the input is known to be good
