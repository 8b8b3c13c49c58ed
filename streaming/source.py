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
* **The series cap**: a read task admits rows of new (cluster, topic, partition) series only
  within its range's share of ``maxSeries`` (``streaming.admission``, deterministic on replays);
  the rest become counted ``bad``/``series_cap`` rows.
* **The log's end**: a batch ends at the offset after the last record, which ``latestOffset``
  takes from a Fetch, not from ListOffsets alone: Tansu 0.6.0 answers ListOffsets with the last
  record batch's base offset + 1 (docs/brokers.md). The end is logged by Spark before the batch
  runs and ``read()`` stops there, so a record that arrives later belongs to the next batch on
  every replay too.
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
from core.hdr import HdrLayout
from core.windows import WindowSpec
from streaming import admission
from streaming.combine import PARTIAL_SCHEMA, Combiner
from streaming.config import DEFAULT_MAX_SERIES
from streaming.parse import PARSED_SCHEMA, mark_future, parse_messages

#: Marked rows, before the combiner: parsed echoes and hiccups, plus counted-not-measured rows.
SOURCE_SCHEMA = pa.schema([*PARSED_SCHEMA, ("event_us", pa.int64()), ("n", pa.int64())])
FETCH_BATCH = 10_000


def spark_schema() -> Any:
    """What the source hands Spark (``PARTIAL_SCHEMA``) as a ``StructType``: derived, never a
    hand-written copy."""
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(PARTIAL_SCHEMA)


#: Seconds without records before checking whether retention removed the ones we wait for.
IDLE_RECHECK_S = 2.0
#: Seconds ``latestOffset`` waits for the Fetch that finds the log's end before planning with
#: ListOffsets' answer alone (a batch that ends early only delays the rest to the next one).
TAIL_FETCH_TIMEOUT_S = 5.0


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
        #: The batch's series book and quotas (None: no checkpoint, no cap).
        self.series: admission.SeriesPlan | None = None

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


def planned_batch_id(checkpoint: str | None) -> int | None:
    """Id of the batch being planned: the last one in Spark's offset log (None before any)."""
    if not checkpoint:
        return None
    try:
        ids = [int(p.name) for p in (Path(checkpoint) / "offsets").iterdir() if p.name.isdigit()]
    except FileNotFoundError:
        return None
    return max(ids) if ids else None


def batch_watermark_us(checkpoint: str | None) -> int:
    """Spark's event-time watermark for the batch being planned (0 before the first)."""
    batch = planned_batch_id(checkpoint)
    if batch is None:
        return 0
    lines = (Path(str(checkpoint)) / "offsets" / str(batch)).read_text().splitlines()
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
        self.layout = HdrLayout.from_option(opts["hdr"]) if "hdr" in opts else HdrLayout()
        self.kafka = json.loads(opts.get("kafka", "{}"))
        self.stall_timeout_s = float(opts.get("stalltimeouts", "600"))
        #: Spark tasks per micro-batch at most (the job passes the default parallelism).
        self.max_slices = int(opts.get("maxinputpartitions", "4"))
        #: An echo this far ahead of its Kafka timestamp is ``bad``/``future``, never event time.
        self.max_skew_us = int(opts.get("maxclockskewus", "300000000"))
        #: Distinct (cluster, topic, partition) series admitted into Spark's state at most.
        self.max_series = int(opts.get("maxseries", DEFAULT_MAX_SERIES))

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

    def _log_ends(self, marks: dict[str, tuple[int, int]]) -> dict[str, int]:
        """The offset after each partition's last record, found by fetching the log's tail.

        ListOffsets' high watermark ``h`` is the log end on Kafka and the mock, but the last
        record batch's base offset + 1 on Tansu 0.6.0 (docs/brokers.md). A Fetch from ``h - 1``
        answers at once on every broker (a record is there) with the whole batch holding it,
        queued all together, so the records delivered show the end. Only delivered records
        count, so the end never passes one a consumer cannot read. A partition with no answer
        within ``TAIL_FETCH_TIMEOUT_S`` keeps ``h``: its rest comes one batch later, never lost.
        """
        from confluent_kafka import KafkaError, TopicPartition

        ends = {p: high for p, (_, high) in marks.items()}
        tail = {int(p): high - 1 for p, (low, high) in marks.items() if high > low}
        if not tail:
            return ends
        c = self._client
        c.assign([TopicPartition(self.topic, p, o) for p, o in tail.items()])
        waiting = set(tail)
        try:
            deadline = time.monotonic() + TAIL_FETCH_TIMEOUT_S
            while time.monotonic() < deadline:
                answered = not waiting
                msgs = c.consume(FETCH_BATCH, 0)
                if not msgs and not answered:
                    msgs = c.consume(1, 0.1)  # back as soon as one record or EOF is there
                for m in msgs:
                    p, o, err = m.partition(), m.offset(), m.error()
                    if err is None and p in tail and o >= tail[p]:
                        ends[str(p)] = max(ends[str(p)], o + 1)
                    elif err and err.code() == KafkaError._PARTITION_EOF and o > tail.get(p, o):
                        ends[str(p)] = max(ends[str(p)], o)  # the fetch position met the end
                    else:
                        continue  # an error (ListOffsets' answer stands) or a leftover
                    waiting.discard(p)
                if answered and len(msgs) < FETCH_BATCH:
                    break  # what came with the answers is read: the queue ran dry
        finally:
            c.unassign()
        return ends

    def initialOffset(self) -> dict:
        """Earliest offsets or log ends of every partition."""
        marks = self._watermarks()
        if self.starting == "earliest":
            return {p: marks[p][0] for p in marks}
        return self._log_ends(marks)

    def getDefaultReadLimit(self) -> ReadLimit:
        """``maxRecordsPerBatch`` bounds each micro-batch."""
        return ReadMaxRows(self.max_rows)

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        """Log ends, capped so one batch reads at most the limit's rows."""
        marks = self._watermarks()
        ends = self._log_ends(marks)
        end = {p: max(ends[p], start.get(p, 0)) for p in marks}
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
        Spark's watermark for this batch and its series plan."""
        watermark_us = batch_watermark_us(self.checkpoint)
        ranges = [
            KafkaRange(int(p), int(start.get(p, 0)), int(end[p]))
            for p in sorted(end, key=int)
            if int(end[p]) > int(start.get(p, 0))
        ]
        out = slices(ranges, self.max_slices, watermark_us)
        batch = planned_batch_id(self.checkpoint)
        if ranges and self.checkpoint and batch is not None:
            plan = admission.plan(
                self.checkpoint,
                batch,
                watermark_us,
                max(self.windows.resolutions_us.values()),
                self.max_series,
                [r.partition for r in ranges],
            )
            for s in out:
                s.series = plan
        return list(out)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """The slice's records as partial histograms (``streaming.combine``)."""
        combiner = Combiner(self.windows, self.layout)
        for marked in self.marked_rows(partition):
            yield from combiner.add(marked)
        yield from combiner.finish()

    def marked_rows(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """Consume every range of the slice; parse; mark future and late echoes; cap the series;
        count gaps: the rows before the combiner (``SOURCE_SCHEMA``), one per record or gap.

        An offset below the retained ones resets to the oldest retained record
        (``auto.offset.reset``), whose offset then reveals the gap, counted as ``data_loss``.
        """
        from confluent_kafka import KafkaError, TopicPartition

        assert isinstance(partition, KafkaSlice)
        wm = partition.watermark_us
        offset = {r.partition: r.start for r in partition.ranges}
        end = {r.partition: r.end for r in partition.ranges}
        plan = partition.series
        cap = admission.TaskAdmission(plan, offset) if plan else None
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
                kafka_partition: list[int] = []
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
                        kafka_partition.append(p)
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
                    parsed, index = parse_messages(values)
                    stamps = pa.array(kafka_us, pa.int64()).take(pa.array(index))
                    rows = self._mark(mark_future(parsed, stamps, self.max_skew_us), wm)
                    if cap is not None:  # a v2 message holds many rows: each has its partition
                        rows = cap.admit(rows, np.asarray(kafka_partition)[index], wm)
                    yield rows
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
            if cap is not None:
                cap.save()
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
