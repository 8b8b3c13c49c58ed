"""A query that fails while it runs is told in one line, not in Java frames.

The operator's path: `nines stream` started as a user starts it, its archive directory replaced
by a file under it (a volume remounted, a path clobbered), so the next batch cannot write. Its
stderr then holds the JVM's errors one line each and the cause in the last line, exit 1; the
Java frames are in `--spark-log`. And a failure inside Spark alone (no Python of ours on the
way) is named by its Java root cause, through the query's real exception.
"""

from __future__ import annotations

import os
import shutil
import signal
import time
from collections import Counter
from pathlib import Path
from typing import Any

from kafka_cluster import unique_topic
from stream_jobs import send, stream_cli

from streaming.jvm_log import CONSOLE_MESSAGE_CHARS, failure_line

#: What a terminal must not show: Java frames, Python tracebacks, chained causes.
TRACES = ("\tat ", "Traceback (most recent call last)", "Caused by:", '  File "')


def test_a_batch_that_cannot_write_stops_the_stream_in_one_line(
    broker: Any, tmp_path: Path
) -> None:
    topic = unique_topic(broker, 2)
    log, spark_log = tmp_path / "stream.log", tmp_path / "spark" / "spark.log"
    t0 = (int(time.time()) // 60 * 60 - 3600) * 1_000_000
    send(broker.bootstrap, topic, range(0, 1500), t0, Counter())
    proc = stream_cli(broker.bootstrap, topic, tmp_path, log, "--spark-log", str(spark_log))
    archive = tmp_path / "archive"
    try:
        deadline = time.monotonic() + 180
        while not any(archive.rglob("*.parquet")):
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.5)
        shutil.rmtree(archive)
        archive.write_text("a file where the archive was\n")
        send(broker.bootstrap, topic, range(1500, 3000), t0 + 60_000_000, Counter())
        rc = proc.wait(120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    err = log.read_text(errors="replace")
    assert rc == 1, err[-3000:]
    assert not [t for t in TRACES if t in err], err[-5000:]
    lines = err.splitlines()
    assert len(lines) <= 12, err
    # the JVM's lines: a timestamp, a level, a logger and a message cut to its bound
    for line in lines:
        assert len(line) <= CONSOLE_MESSAGE_CHARS + 600, line
    last = lines[-1]
    assert "the query stopped: NotADirectoryError: [Errno 20] Not a directory:" in last, err
    assert str(archive) in last and f"Spark's log: {spark_log}" in last
    kept = spark_log.read_text(errors="replace")
    assert "\tat org.apache.spark" in kept and "NotADirectoryError" in kept
    print(f"stderr: {len(lines)} lines; {spark_log}: {len(kept.splitlines())} lines")


def test_a_failure_inside_spark_is_named_by_its_java_root_cause(spark: Any) -> None:
    """No Python of ours between the failure and the query: the line is Java's root cause."""
    from pyspark.sql import functions as F

    frames = spark.readStream.format("rate").option("rowsPerSecond", 10).load()
    failing = frames.select(
        F.when(F.col("value") >= 0, F.raise_error(F.lit("nines-boom: the cause"))).alias("v")
    )
    query = failing.writeStream.format("noop").trigger(processingTime="200 milliseconds").start()
    try:
        deadline = time.monotonic() + 60
        while query.isActive and time.monotonic() < deadline:
            time.sleep(0.2)
        exc = query.exception()
    finally:
        query.stop()
    assert exc is not None
    line = failure_line(exc, None)
    assert "nines-boom: the cause" in line and "\n" not in line, line
    # not the wrapper's own name: the innermost Java exception's
    assert not line.startswith("StreamingQueryException"), line
    assert len(str(exc).splitlines()) > 1  # what it replaces: the query's many lines


def test_a_full_disk_anywhere_in_a_java_chain_names_the_line(spark: Any) -> None:
    """Our sink's Spark call fails in Java (py4j's ``Py4JJavaError``, what the issue saw as
    "An error occurred while calling o637.getResult"): the line is the full disk, wherever the
    chain names it, else the innermost cause."""
    from py4j.protocol import Py4JJavaError

    jvm = spark._jvm

    def raised_in_java(throwable: Any) -> Py4JJavaError:
        try:  # a real throw in the JVM: get() raises ExecutionException(cause=throwable)
            jvm.java.util.concurrent.CompletableFuture.failedFuture(throwable).get()
        except Py4JJavaError as exc:
            return exc
        raise AssertionError("no exception")

    no_space = jvm.java.io.IOException("No space left on device")
    closed = jvm.java.nio.channels.ClosedChannelException()
    middle = jvm.java.io.UncheckedIOException("write failed", no_space)
    middle.getCause().initCause(closed)  # the full disk is not the innermost cause here
    task = jvm.org.apache.spark.SparkException("Job aborted due to stage failure", middle)
    exc = raised_in_java(task)
    assert str(exc).startswith("An error occurred while calling")  # what was the line
    assert failure_line(None, exc) == "IOException: No space left on device"
    other = raised_in_java(jvm.org.apache.spark.SparkException("boom", closed))
    assert failure_line(None, other) == "ClosedChannelException"  # the innermost; no message
