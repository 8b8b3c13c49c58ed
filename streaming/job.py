"""The stream job: source → parse → late marking → HDR buckets → windowed state → sink.

Each stage is a function DataFrame → DataFrame; ``foreachBatch`` receives only closed windows
(append mode: each exactly once), turns them into histograms and hands them to the exporter and
the archive. With a checkpoint, a killed job restarts exactly where Spark's logs say.
"""

from __future__ import annotations

import json
import logging
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from core.config import resolve_secrets
from core.hdr import HdrLayout, SparseHistogram
from core.windows import SeriesKey, WindowHistogram, with_topic_rollups
from monitor.exporter import LatencyExporter, MetricsServer
from streaming.config import StreamConfig
from streaming.counters import StreamCounters
from streaming.histograms import STAT_PREFIX, latency_rows, windowed_histograms

log = logging.getLogger("nines.stream")

#: Spark state store providers: RocksDB keeps the histograms off the JVM heap (on local disk,
#: with a bounded cache), so the 1h windows of many series fit; "memory" is Spark's default.
STATE_STORES = {
    "rocksdb": "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
    "memory": "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider",
}

BatchCallback = Callable[[int, list[WindowHistogram], StreamCounters], None]
#: spark → a streaming DataFrame of the Kafka source's rows (``streaming.source.SOURCE_SCHEMA``).
SourceFactory = Callable[[Any], Any]


def spark_session(config: StreamConfig) -> Any:
    """A Spark session for the job (local mode by default), quiet and with few partitions."""
    import os
    import sys

    from pyspark.sql import SparkSession

    # Spark's Python workers must run this interpreter (it has pyarrow, confluent-kafka, nines).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder
    if config.master:  # empty: spark-submit (e.g. the Spark Operator) chose the master
        builder = builder.master(config.master)
    spark = (
        builder.appName("nines-stream")
        .config("spark.sql.shuffle.partitions", str(config.shuffle_partitions))
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.streaming.stateStore.providerClass", STATE_STORES[config.state_store])
        # RocksDB: checkpoint only the changes of each batch, not a snapshot of the whole state
        .config("spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled", "true")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def read_echoes(spark: Any, config: StreamConfig, checkpoint: str) -> Any:
    """Source: echo records from Kafka as parsed rows (Python data source, or Spark's kafka)."""
    if config.source == "kafka":
        return _read_builtin_kafka(spark, config)
    from streaming.source import NinesKafkaDataSource

    spark.dataSource.register(NinesKafkaDataSource)
    return (
        spark.readStream.format("nines-kafka")
        .option("bootstrap", config.bootstrap)
        .option("topic", config.echo_topic)
        .option("startingOffsets", config.starting_offsets)
        .option("maxRecordsPerBatch", str(config.max_records_per_batch))
        .option("checkpoint", checkpoint)
        .option("finestWindowUs", str(config.finest_us))
        .option("kafka", json.dumps(config.kafka))
        # one Spark task per core and micro-batch, whatever the number of Kafka partitions
        .option("maxInputPartitions", str(spark.sparkContext.defaultParallelism))
        .option("maxClockSkewUs", str(int(config.max_clock_skew * 1_000_000)))
        .load()
    )


def builtin_kafka_rows(batches: Iterable[Any]) -> Iterator[Any]:
    """``mapInArrow`` body for Spark's kafka source: parsed rows with event time and weight.

    A record with no intended time of its own (a bad one) takes its Kafka timestamp as event
    time, so it is counted in the window of its arrival instead of vanishing with a null window.
    """
    from streaming.parse import parse_values
    from streaming.source import SOURCE_SCHEMA

    for b in batches:
        parsed = parse_values(b.column("value").to_pylist())
        event = pc.coalesce(parsed.column("intended_us"), b.column("kafka_us"))
        n = pa.array([1] * parsed.num_rows, pa.int64())
        yield pa.RecordBatch.from_arrays([*parsed.columns, event, n], schema=SOURCE_SCHEMA)


def _read_builtin_kafka(spark: Any, config: StreamConfig) -> Any:
    """Spark's own kafka source (needs spark-sql-kafka on the classpath; see docs)."""
    from pyspark.sql import functions as F

    from streaming.source import SPARK_SCHEMA

    raw = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", config.bootstrap)
        .option("subscribe", config.echo_topic)
        .option("startingOffsets", config.starting_offsets)
        .option("failOnDataLoss", "false")
        .option("maxOffsetsPerTrigger", str(config.max_records_per_batch))
        # librdkafka-style settings as kafka.* options (Spark redacts keys naming a password)
        .options(**{f"kafka.{k}": v for k, v in resolve_secrets(config.kafka).items()})
        .load()
        .select("value", F.unix_micros("timestamp").alias("kafka_us"))
    )
    return raw.mapInArrow(builtin_kafka_rows, SPARK_SCHEMA)


def with_event_time(echoes: Any, config: StreamConfig) -> Any:
    """Event time = intended send time; the watermark trails it by ``config.watermark``."""
    from pyspark.sql import functions as F

    return echoes.withColumn("event_ts", F.timestamp_micros("event_us")).withWatermark(
        "event_ts", f"{int(config.watermark * 1000)} milliseconds"
    )


def build_query(
    spark: Any, config: StreamConfig, checkpoint: str, source: SourceFactory | None = None
) -> Any:
    """The whole chain up to the aggregated closed-window rows (``source`` replaces Kafka)."""
    layout = HdrLayout(config.lowest_us, int(config.highest * 1e6), config.digits)
    resolutions_us = {r: s * 1_000_000 for r, s in config.window_seconds.items()}
    finest = min(resolutions_us, key=lambda r: resolutions_us[r])
    raw = source(spark) if source else read_echoes(spark, config, checkpoint)
    echoes = with_event_time(raw, config)
    rows = latency_rows(echoes, resolutions_us, finest, layout)
    return windowed_histograms(rows, resolutions_us, int(config.watermark * 1000))


def closed_windows(
    table: pa.Table, layout: HdrLayout, resolutions_us: dict[str, int]
) -> tuple[list[WindowHistogram], StreamCounters]:
    """Histograms and counters from one micro-batch's aggregate rows (Arrow, grouped natively)."""
    end_us = pc.cast(table["window_end"], pa.timestamp("us", "UTC")).cast(pa.int64())
    table = table.set_column(table.schema.get_field_index("window_end"), "window_end", end_us)
    is_stat = pc.starts_with(table["kind"], STAT_PREFIX)
    counters: dict[str, dict[Any, int]] = {k: {} for k in ("late", "bad", "data_loss")}
    for r in table.filter(is_stat).to_pylist():
        _, what, *reason = r["kind"].split(":")
        if what == "late":
            key: Any = (r["cluster"], r["topic"], r["partition"])
        elif what == "bad":
            key = reason[0] if reason else "unknown"
        else:
            key = (r["topic"], r["partition"])
        counters.setdefault(what, {})
        counters[what][key] = counters[what].get(key, 0) + int(r["count"])
    keys = ["resolution", "window_end", "cluster", "topic", "partition", "kind"]
    grouped = (
        table.filter(pc.invert(is_stat))
        .group_by(keys, use_threads=False)
        .aggregate(
            [
                ("bucket", "list"),
                ("count", "list"),
                ("max_us", "max"),
                ("sum_us", "sum"),
                ("lost", "sum"),
            ]
        )
    )
    windows = []
    cols = {
        name: grouped[name].to_pylist() for name in (*keys, "max_us_max", "sum_us_sum", "lost_sum")
    }
    buckets, counts = grouped["bucket_list"], grouped["count_list"]
    for i in range(grouped.num_rows):
        res, window_end_us = cols["resolution"][i], cols["window_end"][i]
        hist = SparseHistogram.from_counts(
            layout,
            buckets[i].values.to_numpy(zero_copy_only=False),
            counts[i].values.to_numpy(zero_copy_only=False),
            cols["max_us_max"][i],
            cols["sum_us_sum"][i] or 0,
        )
        series = SeriesKey(
            cols["cluster"][i], cols["topic"][i], cols["partition"][i], cols["kind"][i]
        )
        windows.append(
            WindowHistogram(
                res,
                window_end_us - resolutions_us[res],
                window_end_us,
                series,
                hist,
                int(cols["lost_sum"][i] or 0),
            )
        )
    finest = min(resolutions_us, key=lambda r: resolutions_us[r])
    echoes: dict[Any, int] = {}
    lost: dict[Any, int] = {}
    overflow: dict[SeriesKey, int] = {}
    for w in windows:
        if w.resolution != finest:
            continue
        if w.series.kind == "e2e":
            key = (w.series.cluster, w.series.topic, w.series.partition)
            echoes[key] = echoes.get(key, 0) + w.hist.total
            lost[key] = lost.get(key, 0) + w.lost
        if w.hist.overflow:
            overflow[w.series] = w.hist.overflow
    windows.sort(key=lambda w: w.sort_key)
    return windows, StreamCounters(
        echoes, lost, counters["late"], overflow, counters["bad"], counters["data_loss"]
    )


class StreamJob:
    """The running query plus its exporter; ``start()``, then ``stop()``."""

    def __init__(
        self,
        config: StreamConfig,
        spark: Any = None,
        on_batch: BatchCallback | None = None,
        source: SourceFactory | None = None,
    ) -> None:
        self.config = config
        self.spark = spark
        self.on_batch = on_batch
        self.source = source
        self.layout = HdrLayout(config.lowest_us, int(config.highest * 1e6), config.digits)
        self.resolutions_us = {r: s * 1_000_000 for r, s in config.window_seconds.items()}
        finest = min(self.resolutions_us, key=lambda r: self.resolutions_us[r])
        self.exporter = LatencyExporter(finest_resolution=finest)
        self.server: MetricsServer | None = None
        self.query: Any = None
        self.batches = 0
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self._lock = threading.Lock()

    @property
    def metrics_port(self) -> int | None:
        """The port /metrics is served on (None before ``start``)."""
        return self.server.port if self.server else None

    @property
    def checkpoint(self) -> str:
        """Spark's checkpoint location (a temp dir when none is configured)."""
        if self.config.checkpoint:
            return self.config.checkpoint
        if self._tmp is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="nines-ckpt-")
        return self._tmp.name

    def start(self, serve: bool = True) -> StreamJob:
        """Build and start the query; serve /metrics."""
        if self.spark is None:
            self.spark = spark_session(self.config)
        if serve:
            self.server = self.exporter.serve(self.config.metrics_host, self.config.metrics_port)
        aggregated = build_query(self.spark, self.config, self.checkpoint, self.source)
        self.query = (
            aggregated.writeStream.outputMode("append")
            .foreachBatch(self._sink)
            .option("checkpointLocation", self.checkpoint)
            .trigger(processingTime=f"{int(self.config.trigger * 1000)} milliseconds")
            .queryName(f"nines-{id(self)}")
            .start()
        )
        return self

    def _sink(self, df: Any, batch_id: int) -> None:
        windows, counters = closed_windows(df.toArrow(), self.layout, self.resolutions_us)
        windows = with_topic_rollups(windows)
        if self.config.archive:
            from streaming.archive import write_windows

            write_windows(self.config.archive, batch_id, windows)
        self.exporter.update(windows, counters)
        self._health()
        with self._lock:
            self.batches += 1
        if self.on_batch:
            self.on_batch(batch_id, windows, counters)

    def _health(self) -> None:
        progress = self.query.lastProgress if self.query else None
        if not progress:
            return
        duration_s = progress.get("durationMs", {}).get("triggerExecution", 0) / 1000
        wm = progress.get("eventTime", {}).get("watermark")
        lag_s = 0.0
        if wm:
            wm_s = datetime.fromisoformat(wm.replace("Z", "+00:00")).timestamp()
            lag_s = time.time() - wm_s if wm_s > 0 else 0.0  # < 0: the watermark is ahead of now
        state = sum(op.get("numRowsTotal", 0) for op in progress.get("stateOperators", []))
        self.exporter.set_pipeline_health(
            duration_s, float(progress.get("inputRowsPerSecond") or 0.0), lag_s, state, time.time()
        )

    def latest_windows(self) -> dict[str, list[WindowHistogram]]:
        """Resolution → the latest closed window of each series."""
        return self.exporter.latest_windows()

    def process_all_available(self) -> None:
        """Block until everything currently in Kafka has been processed (tests, demo)."""
        self.query.processAllAvailable()

    def await_termination(self, timeout_s: float | None = None) -> bool:
        """Wait for the query to end."""
        return bool(self.query.awaitTermination(timeout_s))

    def stop(self) -> None:
        """Stop the query and the metrics server."""
        if self.query is not None:
            try:
                self.query.stop()
            except Exception:
                log.exception("stopping the query")
        if self.server is not None:
            self.server.close()
            self.server = None


def run_stream(config: StreamConfig) -> int:
    """Run until SIGTERM/SIGINT (exit 0) or until the query fails (exit 1)."""
    import signal

    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    job = StreamJob(config).start()
    log.info("nines stream: /metrics on %s:%s", config.metrics_host, job.metrics_port)
    try:
        while not stop.is_set():
            if not job.query.isActive:
                exc = job.query.exception()
                log.error("the query stopped: %s", exc)
                return 1
            stop.wait(0.5)
    finally:
        job.stop()
    return 0
