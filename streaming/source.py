"""The Kafka source: a Spark Python Data Source over confluent-kafka, yielding Arrow batches.

Pickle rules first: the reader is pickled to Spark's Python workers, so it holds only plain
configuration; Kafka clients are opened inside ``latestOffset``/``read``, never in constructors.

Offsets are Spark-managed (per-partition next offsets in the checkpoint); each Spark input
partition is a slice of the Kafka partitions with records, read through one consumer. Two things
are decided here so that nothing is lost silently:

* **Retention gaps**: offsets that vanished before we read them are counted (a ``data_loss``
  row), and reading continues, like Spark's ``failOnDataLoss=false``.
* **Late echoes**: Spark drops rows behind its watermark without a trace. ``partitions()`` runs
  after Spark has logged the batch's offsets, so it reads Spark's own ``batchWatermarkMs`` from
  the offset log and ``read()`` turns every echo whose finest window has already closed into a
  counted ``late`` row. Replays read the same log line, so this is deterministic.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows

from core.config import resolve_secrets
from core.windows import WindowSpec
from streaming.parse import PARSED_SCHEMA, parse_with_stamps

#: Row types the source emits: parsed echoes and hiccups, plus counted-not-measured rows.
SOURCE_SCHEMA = pa.schema([*PARSED_SCHEMA, ("event_us", pa.int64()), ("n", pa.int64())])
FETCH_BATCH = 10_000


def spark_schema() -> Any:
    """``SOURCE_SCHEMA`` as Spark's ``StructType``: derived, never a hand-written copy."""
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(SOURCE_SCHEMA)


#: Seconds without records before checking whether retention removed the ones we wait for.
IDLE_RECHECK_S = 2.0


@dataclass(frozen=True)
class KafkaRange:
    """One Kafka partition's offsets [start, end) for one micro-batch."""

    partition: int
    start: int
    end: int


class KafkaSlice(InputPartition):
    """What one Spark task reads: several partitions' ranges, through one consumer.

    One task per Kafka partition cost ~60 ms each before the first record (a consumer, its
    connections, the first fetch) plus Spark's per-task overhead: with 32 partitions that was
    most of a micro-batch. A slice assigns all its ranges at once, so their first fetches overlap.
    """

    def __init__(self, index: int, ranges: list[KafkaRange], watermark_us: int) -> None:
        super().__init__(index)
        self.ranges, self.watermark_us = ranges, watermark_us

    @property
    def index(self) -> int:
        """The slice's number in its micro-batch (Spark's ``InputPartition.value``)."""
        return int(self.value)


def slices(ranges: list[KafkaRange], n: int, watermark_us: int) -> list[KafkaSlice]:
    """At most ``n`` slices of about equal record counts (largest range first, to the lightest)."""
    bins: list[list[KafkaRange]] = [[] for _ in range(max(1, min(n, len(ranges))))]
    load = [0] * len(bins)
    for r in sorted(ranges, key=lambda r: (r.start - r.end, r.partition)):
        i = load.index(min(load))
        bins[i].append(r)
        load[i] += r.end - r.start
    return [
        KafkaSlice(i, sorted(b, key=lambda r: r.partition), watermark_us)
        for i, b in enumerate(bins)
        if b
    ]


def batch_watermark_us(checkpoint: str | None) -> int:
    """Spark's event-time watermark for the batch being planned (0 before the first)."""
    if not checkpoint:
        return 0
    offsets = Path(checkpoint) / "offsets"
    try:
        ids = [int(p.name) for p in offsets.iterdir() if p.name.isdigit()]
    except FileNotFoundError:
        return 0
    if not ids:
        return 0
    lines = (offsets / str(max(ids))).read_text().splitlines()
    return int(json.loads(lines[1]).get("batchWatermarkMs", 0)) * 1000


class NinesKafkaDataSource(DataSource):
    """``spark.readStream.format("nines-kafka")``: echo records from a Kafka topic."""

    @classmethod
    def name(cls) -> str:
        """Format name."""
        return "nines-kafka"

    def schema(self) -> Any:
        """Parsed echoes plus counted rows."""
        return spark_schema()

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        """A reader over the configured topic."""
        return KafkaEchoReader(dict(self.options))


class KafkaEchoReader(DataSourceStreamReader):
    """Spark-managed offsets over one topic; reads each partition range into Arrow batches."""

    def __init__(self, options: dict[str, str]) -> None:
        opts = {k.lower(): v for k, v in options.items()}  # Spark's options are case-insensitive
        self.bootstrap = opts["bootstrap"]
        self.topic = opts["topic"]
        self.starting = opts.get("startingoffsets", "latest")
        self.max_rows = int(opts.get("maxrecordsperbatch", "1000000"))
        self.checkpoint = opts.get("checkpoint")
        self.windows = WindowSpec.from_option(opts["windows"])
        self.kafka = json.loads(opts.get("kafka", "{}"))
        self.stall_timeout_s = float(opts.get("stalltimeouts", "600"))
        #: Spark tasks per micro-batch at most (the job passes the default parallelism).
        self.max_slices = int(opts.get("maxinputpartitions", "4"))
        #: An echo this far ahead of its Kafka timestamp is ``bad``/``future``, never event time.
        self.max_skew_us = int(opts.get("maxclockskewus", "300000000"))

    def _consumer(self) -> Any:
        from confluent_kafka import Consumer

        return Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": f"nines-stream-{os.getpid()}",
                "enable.auto.commit": False,
                "enable.partition.eof": True,
                "fetch.wait.max.ms": 50,
                # large fetches: twice the records/s of the defaults on one core (measured);
                # the pre-fetch queue stays bounded at 64 MiB per consumer
                "max.partition.fetch.bytes": 10 * 1024 * 1024,
                "fetch.max.bytes": 50 * 1024 * 1024,
                "queued.min.messages": 500_000,
                "queued.max.messages.kbytes": 64 * 1024,
                # an offset removed while we read: restart at the oldest one, and count the gap
                "auto.offset.reset": "earliest",
                # env:/file: secrets resolve here, where the consumer runs (the executor has
                # the Secret), so no secret ever enters Spark's options, plans or logs
                **resolve_secrets(self.kafka),
            }
        )

    def _watermarks(self) -> dict[str, tuple[int, int]]:
        from confluent_kafka import TopicPartition

        c = getattr(self, "_client", None)
        if c is None:
            c = self._client = self._consumer()
        md = c.list_topics(self.topic, timeout=10)
        parts = md.topics[self.topic].partitions
        return {
            str(p): c.get_watermark_offsets(TopicPartition(self.topic, p), timeout=10)
            for p in sorted(parts)
        }

    def initialOffset(self) -> dict:
        """Earliest or latest offsets of every partition."""
        marks = self._watermarks()
        pick = 0 if self.starting == "earliest" else 1
        return {p: marks[p][pick] for p in marks}

    def getDefaultReadLimit(self) -> ReadLimit:
        """``maxRecordsPerBatch`` bounds each micro-batch."""
        return ReadMaxRows(self.max_rows)

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        """High watermarks, capped so one batch reads at most the limit's rows."""
        marks = self._watermarks()
        end = {p: max(marks[p][1], start.get(p, 0)) for p in marks}
        if isinstance(limit, ReadAllAvailable) or not isinstance(limit, ReadMaxRows):
            return end
        budget = limit.max_rows
        pending = {p: end[p] - max(start.get(p, 0), marks[p][0]) for p in end}
        total = sum(pending.values())
        if total <= budget:
            return end
        out = {}
        for p in end:
            share = budget * pending[p] // total if total else 0
            out[p] = min(end[p], max(start.get(p, 0), marks[p][0]) + max(share, 1))
        return out

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        """Kafka partitions with records, in at most ``maxInputPartitions`` slices, stamped with
        Spark's watermark for this batch."""
        watermark_us = batch_watermark_us(self.checkpoint)
        ranges = [
            KafkaRange(int(p), int(start.get(p, 0)), int(end[p]))
            for p in sorted(end, key=int)
            if int(end[p]) > int(start.get(p, 0))
        ]
        return list(slices(ranges, self.max_slices, watermark_us))

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """Consume every range of the slice; parse; mark future and late echoes; count gaps.

        An offset below the retained ones resets to the oldest retained record
        (``auto.offset.reset``), whose offset then reveals the gap, counted as ``data_loss``.
        """
        from confluent_kafka import KafkaError, TopicPartition

        assert isinstance(partition, KafkaSlice)
        wm = partition.watermark_us
        offset = {r.partition: r.start for r in partition.ranges}
        end = {r.partition: r.end for r in partition.ranges}
        c = self._consumer()
        try:
            c.assign([TopicPartition(self.topic, p, o) for p, o in offset.items()])
            open_ = set(offset)
            idle_since: float | None = None
            while open_:
                want = sum(end[p] - offset[p] for p in open_)
                msgs = c.consume(min(FETCH_BATCH, want), 1.0)
                values = []
                kafka_us: list[int | None] = []
                finished = []
                for m in msgs:
                    if m.error():
                        if m.error().code() != KafkaError._PARTITION_EOF:
                            raise RuntimeError(f"kafka: {m.error().str()}")
                        continue
                    p, o = m.partition(), m.offset()
                    if p not in open_ or o < offset[p]:  # done, or already read (re-assign)
                        continue
                    if o > offset[p]:  # offsets vanished before or while we read (retention)
                        yield self._data_loss(p, min(o, end[p]) - offset[p], wm)
                        offset[p] = min(o, end[p])
                    if o < end[p]:
                        values.append(m.value())  # None: a tombstone, counted as such
                        kind, ms = m.timestamp()
                        kafka_us.append(ms * 1000 if kind else None)
                        offset[p] = o + 1
                    if offset[p] >= end[p]:
                        open_.discard(p)
                        finished.append(TopicPartition(self.topic, p))
                if finished:  # stop fetching what this batch does not need
                    c.pause(finished)
                if values:
                    idle_since = None
                    yield self._mark(parse_with_stamps(values, kafka_us, self.max_skew_us), wm)
                    continue
                if msgs:
                    continue
                now = time.monotonic()
                idle_since = idle_since or now
                if now - idle_since < IDLE_RECHECK_S:
                    continue
                # Nothing arrives: either retention overtook us (count it, go on from the new
                # low watermark) or the broker is slow or down (wait; the records still exist).
                moved = []
                for p in sorted(open_):
                    low = self._low_watermark(c, p)
                    if low is not None and low > offset[p]:
                        yield self._data_loss(p, min(low, end[p]) - offset[p], wm)
                        offset[p] = min(low, end[p])
                        moved.append(p)
                if moved:
                    open_ -= {p for p in moved if offset[p] >= end[p]}
                    c.assign([TopicPartition(self.topic, p, offset[p]) for p in sorted(open_)])
                    idle_since = None
                elif now - idle_since > self.stall_timeout_s:
                    waiting = ", ".join(f"[{p}] at offset {offset[p]}" for p in sorted(open_))
                    raise RuntimeError(
                        f"kafka: no records from {self.topic} {waiting} for "
                        f"{self.stall_timeout_s:g} s (the batch needs them); failing the batch "
                        "instead of skipping them"
                    )
        finally:
            c.close()

    def _low_watermark(self, c: Any, partition: int) -> int | None:
        """The partition's first offset still retained (None while the broker does not answer)."""
        from confluent_kafka import KafkaException, TopicPartition

        try:
            low, _ = c.get_watermark_offsets(TopicPartition(self.topic, partition), timeout=5)
        except KafkaException:
            return None
        return int(low)

    def _data_loss(self, partition: int, gap: int, watermark_us: int) -> pa.RecordBatch:
        row = {
            "rtype": "data_loss",
            "topic": self.topic,
            "partition": partition,
            "event_us": watermark_us,
            "n": gap,
        }
        return pa.RecordBatch.from_pylist([row], schema=SOURCE_SCHEMA)

    def _mark(self, parsed: pa.RecordBatch, wm: int) -> pa.RecordBatch:
        """Event time and weight per row; echoes whose finest window closed become ``late``."""
        intended = parsed.column("intended_us")
        window_end = self.windows.window_end_us(
            pc.fill_null(intended, 0).to_numpy(zero_copy_only=False)
        )
        valid = pc.is_valid(intended).to_numpy(zero_copy_only=False)
        is_late = pa.array(np.asarray(window_end <= wm) & valid)
        is_bad = pc.equal(parsed.column("rtype"), "bad")
        is_late = pc.and_(is_late, pc.invert(is_bad))
        rtype = pc.if_else(is_late, "late", parsed.column("rtype"))
        event = pc.if_else(pc.or_(is_late, is_bad), pa.scalar(wm, pa.int64()), intended)
        cols = [rtype, *parsed.columns[1:], event, pa.array([1] * parsed.num_rows, pa.int64())]
        return pa.RecordBatch.from_arrays(cols, schema=SOURCE_SCHEMA)

    def commit(self, end: dict) -> None:
        """Offsets live in Spark's checkpoint; nothing to commit to Kafka."""

    def stop(self) -> None:
        """Close the metadata client."""
        c = getattr(self, "_client", None)
        if c is not None:
            c.close()
