"""The Kafka source: a Spark Python Data Source over confluent-kafka, yielding partial histograms.

Pickle rules first: the reader is pickled to Spark's Python workers, so it holds only plain
configuration; Kafka clients are opened inside ``latestOffset``/``read``, never in constructors.

Offsets are Spark-managed (per-partition next offsets in the checkpoint); each Spark input
partition is a slice of the Kafka partitions with records, read through one consumer. This
module plans and wires; each job it hands on lives in its own module, so that nothing is lost
silently:

* **The consume loop and the log's end** (``streaming.consume``): a batch ends at the offset
  after the last record, which ``latestOffset`` takes from a Fetch, not from ListOffsets alone:
  Tansu 0.6.0 answers ListOffsets with the last record batch's base offset + 1
  (docs/brokers.md). The end is logged by Spark before the batch runs and ``read()`` stops
  there, so a record that arrives later belongs to the next batch on every replay too.
* **Retention gaps** (``streaming.gaps``): offsets that vanished before we read them are
  counted (a ``data_loss`` row), and reading continues, like Spark's ``failOnDataLoss=false``.
* **Late echoes** (``streaming.offset_log``, ``streaming.marks``): Spark drops rows behind its
  watermark without a trace. ``partitions()`` runs after Spark has logged the batch's offsets,
  so it reads Spark's own ``batchWatermarkMs`` from the offset log and ``read()`` turns every
  echo whose finest window has already closed into a counted ``late`` row. Replays read the
  same log line, so this is deterministic.
* **The series cap** (``streaming.admission``): a read task admits rows of new (cluster,
  topic, partition) series only within its range's share of ``max_series`` (deterministic on
  replays); the rest become counted ``bad``/``series_cap`` rows.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows

from core.kafka_conf import KafkaAuth
from streaming import admission
from streaming.combine import Combiner
from streaming.consume import Fetched, consume_ranges, log_ends, open_consumer, watermarks
from streaming.gaps import Gap, KafkaRange
from streaming.marks import data_loss_row, mark_future, mark_late
from streaming.offset_log import batch_watermark_us, planned_batch_id
from streaming.options import decode_options
from streaming.parse import parse_messages
from streaming.state_keys import PARTIAL_SCHEMA


def spark_schema() -> Any:
    """What the source hands Spark (``PARTIAL_SCHEMA``) as a ``StructType``: derived, never a
    hand-written copy."""
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(PARTIAL_SCHEMA)


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
        opts = decode_options(options)  # the job's settings, typed as in StreamConfig
        self.bootstrap = opts.bootstrap
        self.topic = opts.echo_topic
        self.starting = opts.starting_offsets
        self.max_rows = opts.max_records_per_batch
        self.checkpoint = opts.checkpoint
        self.windows = opts.windows
        self.layout = opts.layout
        self.kafka = opts.kafka
        #: Plain data: the token callback is built by ``open_consumer``, in the worker.
        self.auth = KafkaAuth(opts.kafka_login, opts.aws_region)  # type: ignore[arg-type]
        self.stall_timeout_s = opts.stall_timeout_s
        #: Spark tasks per micro-batch at most (the job passes the default parallelism).
        self.max_slices = opts.max_input_partitions
        #: An echo this far ahead of its Kafka timestamp is ``bad``/``future``, never event time
        #: (``max_clock_skew`` is seconds up to here, the µs of the echo fields from here on).
        self.max_skew_us = round(opts.max_clock_skew * 1_000_000)
        #: Distinct (cluster, topic, partition) series admitted into Spark's state at most.
        self.max_series = opts.max_series

    def _consumer(self) -> Any:
        return open_consumer(self.bootstrap, self.kafka, self.auth)

    def _watermarks(self) -> dict[str, tuple[int, int]]:
        c = getattr(self, "_client", None)
        if c is None:
            c = self._client = self._consumer()
        return watermarks(c, self.topic)

    def _log_ends(self, marks: dict[str, tuple[int, int]]) -> dict[str, int]:
        return log_ends(self._client, self.topic, marks)

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
        count gaps: the rows before the combiner (``SOURCE_SCHEMA``), one per record or gap."""
        assert isinstance(partition, KafkaSlice)
        wm = partition.watermark_us
        plan = partition.series
        cap = (
            admission.TaskAdmission(plan, [r.partition for r in partition.ranges]) if plan else None
        )
        c = self._consumer()
        try:
            for got in consume_ranges(c, self.topic, partition.ranges, self.stall_timeout_s):
                if isinstance(got, Gap):
                    yield data_loss_row(self.topic, got, wm)
                    continue
                for piece in got.pieces():
                    yield self._marked(piece, wm, cap)
            if cap is not None:
                cap.save()
        finally:
            c.close()

    def _marked(self, got: Fetched, wm: int, cap: admission.TaskAdmission | None) -> pa.RecordBatch:
        """One piece of a fetch parsed, marked (future, late) and capped."""
        parsed, index = parse_messages(got.values)
        stamps = pa.array(got.kafka_us, pa.int64()).take(pa.array(index))
        rows = mark_late(mark_future(parsed, stamps, self.max_skew_us), self.windows, wm)
        if cap is not None:  # a v2 message holds many rows: each has its partition
            rows = cap.admit(rows, np.asarray(got.partitions)[index], wm)
        return rows

    def commit(self, end: dict) -> None:
        """Offsets live in Spark's checkpoint; nothing to commit to Kafka."""

    def stop(self) -> None:
        """Close the metadata client."""
        c = getattr(self, "_client", None)
        if c is not None:
            c.close()
