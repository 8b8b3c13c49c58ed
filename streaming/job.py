"""The stream job: source (parse → late marking → combiner) → windowed state → sink.

Each stage is a function DataFrame → DataFrame; ``foreachBatch`` receives only closed windows
(append mode: each exactly once), turns them into histograms and hands them to the archive and
the job's ``WindowSink`` (the exporter, which ``monitor`` wires in: the job knows none). With a
checkpoint, a killed job restarts exactly where Spark's logs say.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import TYPE_CHECKING, Any

from core.windows import WindowHistogram, with_rollups
from runtime.disk import NO_SPACE, fullest
from streaming import jvm_log
from streaming.closed import closed_windows
from streaming.config import StreamConfig
from streaming.counters import StreamCounters
from streaming.histograms import windowed_histograms
from streaming.options import encode_options
from streaming.sink import WindowSink
from streaming.state_format import check_state_format, job_settings

if TYPE_CHECKING:
    from streaming.archive import ArchiveWriter

log = logging.getLogger("nines.stream")
#: py4j's logger of Python callbacks (our foreachBatch sink) that fail: one line each.
_PY4J_CALLBACKS = logging.getLogger("py4j.clientserver")

#: Spark state store providers: RocksDB keeps the histograms off the JVM heap (on local disk,
#: with a bounded cache), so the 1h windows of many series fit; "memory" is Spark's default.
STATE_STORES = {
    "rocksdb": "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
    "memory": "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider",
}

#: Spark's checkpoint writes (offset and commit logs, state files) through Hadoop's FileSystem
#: API. Its default, the FileContext API, checks every rename's target with Hadoop's
#: ``FileUtil.readLink``, which forks a ``readlink`` process on a local disk (no native Hadoop
#: library): about 10 forks a second at a 0.5 s trigger, and walCommit + commitOffsets went
#: from 70-100 ms to ~16 ms a batch without them (bench.stages). Our checkpoint is always a
#: local (or mounted) directory, whose renames are atomic either way. Its rename is not
#: interruptible, so a batch that reached its commit when the job stopped stays committed (a
#: restart starts after it); exactly once either way (tests/.../test_stream_shutdown.py).
CHECKPOINT_FILE_MANAGER = (
    "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager"
)

#: Interpreted expressions, no generated code. Spark compiles (Janino) and loads two new classes
#: every micro-batch, because the state operators' eviction predicates inline that batch's
#: watermark; our JVM sees a few dozen rows a batch, where generated code saves nothing. The job
#: took 0.079-0.093 of a core instead of 0.105-0.107 at 1,500 echoes/s (bench.scale's live
#: replay, two runs each).
#: ``factoryMode`` is an internal Spark conf (4.3); an unknown one would be ignored.
NO_CODEGEN = {
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
}

#: On SIGTERM/SIGINT, how long ``StreamJob.stop`` lets an in-flight micro-batch finish before
#: abandoning it (a restart replays an abandoned batch from the checkpoint, exactly once). Under
#: Kubernetes' default grace period of 30 s, which also covers the exporter's shutdown.
STOP_GRACE_S = 20.0

BatchCallback = Callable[[int, list[WindowHistogram], StreamCounters], None]
#: spark → a streaming DataFrame of partial histograms (``streaming.state_keys.PARTIAL_SCHEMA``).
SourceFactory = Callable[[Any], Any]


@contextlib.contextmanager
def _signals_stay_ours() -> Iterator[None]:
    """Launch the Spark JVM with SIGTERM ignored, as PySpark already does for SIGINT, and keep
    this process's SIGTERM and SIGINT handlers (PySpark's SparkContext replaces SIGINT's).

    A SIGTERM sent to the whole process group (a terminal, ``timeout``, an init that signals the
    group) would otherwise reach the JVM too: its shutdown hook stops the SparkContext under the
    running query, and stopping the query then logs Java stack traces ("Cannot call methods on
    a stopped SparkContext"). A signal ignored at exec stays ignored, and the JVM installs no
    shutdown handler for it: the Python side stops the query first, and the JVM ends with it.
    Only the main thread may change handlers; elsewhere they are left alone.
    """
    import pyspark.java_gateway as gateway

    launch = gateway.Popen

    def popen(*args: Any, **kwargs: Any) -> Any:
        before = kwargs.get("preexec_fn")

        def preexec() -> None:
            if before is not None:
                before()
            signal.signal(signal.SIGTERM, signal.SIG_IGN)

        return launch(*args, **{**kwargs, "preexec_fn": preexec})

    ours = {}
    if threading.current_thread() is threading.main_thread():
        ours = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    gateway.Popen = popen  # type: ignore[assignment,misc]
    try:
        yield
    finally:
        gateway.Popen = launch  # type: ignore[misc]
        for sig, handler in ours.items():
            if handler is not None:
                signal.signal(sig, handler)


def spark_session(config: StreamConfig) -> Any:
    """A Spark session for the job (local mode by default), quiet and with few partitions."""
    import os
    import sys

    from pyspark.sql import SparkSession

    from streaming import aggregator_jar

    jar = aggregator_jar.resolve()
    # Spark's Python workers must run this interpreter (it has pyarrow, confluent-kafka, nines).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder
    if config.master:  # empty: spark-submit (e.g. the Spark Operator) chose the master
        builder = builder.master(config.master)
    logging.getLogger("py4j").setLevel(logging.WARNING)  # a line per callback connection
    if not any(isinstance(f, jvm_log.TraceToLine) for f in _PY4J_CALLBACKS.filters):
        _PY4J_CALLBACKS.addFilter(jvm_log.TraceToLine())
    log4j = jvm_log.write_log4j_properties(config.spark_log)
    try:
        with _signals_stay_ours():
            spark = _build_session(builder, config, jar, jvm_log.java_option(log4j))
    finally:
        os.unlink(log4j)  # read once, when the JVM started
    if not config.spark_log:  # else the file keeps WARN up: stderr has errors only either way
        spark.sparkContext.setLogLevel("ERROR")
    aggregator_jar.register(spark)
    return spark


def _build_session(builder: Any, config: StreamConfig, jar: str, log4j_option: str) -> Any:
    """``builder``'s session (the JVM starts here unless one runs already); the driver reads
    ``log4j_option``'s configuration unless ``jvm_options`` names one of its own."""
    driver_options = config.jvm_options
    if "log4j2.configurationFile" not in driver_options:
        driver_options = f"{driver_options} {log4j_option}".strip()
    for key, value in NO_CODEGEN.items():
        builder = builder.config(key, value)
    return (
        builder.appName("nines-stream")
        .config("spark.sql.shuffle.partitions", str(config.shuffle_partitions))
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.jars", jar)  # a local path: the driver serves it to its executors
        # the driver's flags take effect where this process starts the JVM (local mode, not
        # under spark-submit); the executors' wherever executors are launched for this session
        .config("spark.driver.extraJavaOptions", driver_options)
        .config("spark.executor.extraJavaOptions", config.jvm_options)
        .config("spark.sql.streaming.stateStore.providerClass", STATE_STORES[config.state_store])
        .config("spark.sql.streaming.checkpointFileManagerClass", CHECKPOINT_FILE_MANAGER)
        # RocksDB: checkpoint only the changes of each batch, not a snapshot of the whole state
        .config("spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled", "true")
        .getOrCreate()
    )


def read_echoes(spark: Any, config: StreamConfig, checkpoint: str) -> Any:
    """Source: echo records from Kafka as partial histograms (our Python data source)."""
    from streaming.source import NinesKafkaDataSource

    spark.dataSource.register(NinesKafkaDataSource)
    # one Spark task per core and micro-batch, whatever the number of Kafka partitions
    options = encode_options(config, checkpoint, spark.sparkContext.defaultParallelism)
    return spark.readStream.format("nines-kafka").options(**options).load()


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
    partials = source(spark) if source else read_echoes(spark, config, checkpoint)
    return windowed_histograms(
        with_event_time(partials, config), config.spec, int(config.watermark * 1000)
    )


class StreamJob:
    """The running query; closed windows leave through ``sink`` and ``on_batch``."""

    def __init__(
        self,
        config: StreamConfig,
        spark: Any = None,
        on_batch: BatchCallback | None = None,
        source: SourceFactory | None = None,
        sink: WindowSink | None = None,
    ) -> None:
        self.config = config
        self.spark = spark
        self.on_batch = on_batch
        self.source = source
        self.sink = sink
        self.layout = config.layout
        self.spec = config.spec
        self.query: Any = None
        self.batches = 0
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self._archive: ArchiveWriter | None = None  # made in the sink: it runs on the driver
        self._lock = threading.Lock()
        #: what the sink raised last, if anything: the cause of a query that stops on it
        self.sink_error: BaseException | None = None

    @property
    def checkpoint(self) -> str:
        """Spark's checkpoint location (a temp dir when none is configured)."""
        if self.config.checkpoint:
            return self.config.checkpoint
        if self._tmp is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="nines-ckpt-")
        return self._tmp.name

    def start(self) -> StreamJob:
        """Build and start the query (a checkpoint of another state format: ConfigError)."""
        check_state_format(self.checkpoint, job_settings(self.config))
        if self.spark is None:
            self.spark = spark_session(self.config)
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
        try:
            self._sink_batch(df, batch_id)
        except BaseException as exc:  # py4j hands Spark only its text: keep it for failure()
            self.sink_error = exc
            raise

    def failure(self) -> str:
        """Why the query stopped, in one line (``jvm_log.failure_line``); on a full disk, with
        the file system of the job's directories that has the least space free."""
        exc = self.query.exception() if self.query is not None else None
        line = jvm_log.failure_line(exc, self.sink_error)
        if NO_SPACE in line:  # Java's says no path: name the file system that is full
            c = self.config
            state = os.path.join(c.checkpoint, "state") if c.checkpoint else None
            where = fullest(
                [
                    ("stream.checkpoint", c.checkpoint),
                    ("stream.checkpoint", state),  # Spark's state: a volume of its own maybe
                    ("stream.archive", c.archive),
                    ("stream.spark_log", c.spark_log),
                ]
            )
            line = f"{line}; the disk is full: {where}" if where else line
        return line

    def _sink_batch(self, df: Any, batch_id: int) -> None:
        windows, counters = closed_windows(df.toArrow(), self.layout, self.spec)
        windows = with_rollups(windows)
        c = self.config
        if c.archive:
            if self._archive is None:
                from streaming.archive import ArchiveWriter

                self._archive = ArchiveWriter(
                    c.archive, c.archive_retention, c.archive_compact, c.archive_max_size
                )
            self._archive.write(batch_id, windows)
        if self.sink is not None:
            self.sink.update(windows, counters)
            self._health(self.sink)
        with self._lock:
            self.batches += 1
        if self.on_batch:
            self.on_batch(batch_id, windows, counters)

    def _health(self, sink: WindowSink) -> None:
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
        sink.set_pipeline_health(
            duration_s, float(progress.get("inputRowsPerSecond") or 0.0), lag_s, state, time.time()
        )

    def stop(self, grace_s: float = STOP_GRACE_S) -> None:
        """Stop the query, letting an in-flight micro-batch finish within ``grace_s``.

        A batch still running then is abandoned when Spark's interrupt reaches it (in its Spark
        jobs, or any interruptible call before its commit): its offsets are in the checkpoint's
        log but not its commit, so a restart replays it (its archive file is rewritten, not
        added). A batch inside the Python sink then (``on_batch``) finishes first, because the
        JVM thread waits on a socket that an interrupt does not break, and it may commit: a
        restart then starts after it. Exactly once either way.
        """
        if self.query is None:
            return
        try:
            deadline = time.monotonic() + grace_s
            while (
                self.query.isActive
                and self.query.status.get("isTriggerActive")
                and time.monotonic() < deadline
            ):
                time.sleep(0.05)
            if self.query.isActive and self.query.status.get("isTriggerActive"):
                log.warning(
                    "stopping: the micro-batch in flight did not finish within %gs; "
                    "it is abandoned, and a restart replays it",
                    grace_s,
                )
            self.query.stop()
        except Exception as exc:  # the JVM went first (killed, or its own shutdown): nothing left
            log.warning(
                "stopping the query: %s",
                str(exc).strip().splitlines()[0] if str(exc) else type(exc).__name__,
            )
