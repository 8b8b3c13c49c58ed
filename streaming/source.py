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
* **Offsets that went back** (``streaming.resets``): a topic deleted and recreated (a new
  topic id) or truncated ends below Spark's offset. ``latestOffset`` says so in one line, logs
  its decision in the batch's end offsets (where each such partition is read from again), and
  that batch counts an ``offsets_reset`` row per partition; the topic's id is kept in Spark's
  offsets under ``resets.TOPIC_ID``. A topic that is gone for now keeps its offsets.
* **The series cap** (``streaming.admission``): a read task admits rows of new (cluster,
  topic, partition) series only within its range's share of ``max_series`` (deterministic on
  replays); the rest become counted ``bad``/``series_cap`` rows.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows

from core.kafka_conf import KafkaAuth
from streaming import admission, resets
from streaming.combine import Combiner
from streaming.consume import (
    TOPIC_UNAVAILABLE,
    Fetched,
    consume_ranges,
    log_ends,
    open_admin,
    open_consumer,
    topic_id,
    watermarks,
)
from streaming.gaps import Gap, KafkaRange
from streaming.marks import data_loss_row, mark_future, mark_late, offsets_reset_row
from streaming.offset_log import batch_watermark_us, planned_batch_id
from streaming.options import decode_options
from streaming.parse import parse_messages
from streaming.state_keys import PARTIAL_SCHEMA

log = logging.getLogger("nines.stream.source")


def _say(line: str) -> None:
    """One warning line on stderr. The planner runs in a Python worker of Spark's, whose
    stderr is the job's and which has no logging set up: give it the job's line format."""
    if not log.handlers and not logging.getLogger().handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
        log.addHandler(handler)
        log.propagate = False
    log.warning("%s", line)


def spark_schema() -> Any:
    """What the source hands Spark (``PARTIAL_SCHEMA``) as a ``StructType``: derived, never a
    hand-written copy."""
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(PARTIAL_SCHEMA)


class KafkaSlice(InputPartition):
    """What one Spark task reads: several partitions' ranges, through one consumer.

    One task per Kafka partition paid a consumer, its connections and the first fetch before
    the first record, plus Spark's per-task overhead: with many partitions that was most of a
    micro-batch (docs/benchmarks.md, figures the code cites). A slice assigns all its ranges at
    once, so their first fetches overlap.
    """

    def __init__(self, index: int, ranges: list[KafkaRange], watermark_us: int) -> None:
        super().__init__(index)
        self.ranges, self.watermark_us = ranges, watermark_us
        #: Partitions whose offsets went back in this batch: each counted once, here.
        self.resets: list[int] = []
        #: The topic's id when the batch was planned (None: unknown).
        self.topic_id: str | None = None
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

    def _topic_id(self) -> str | None:
        """The topic's id now; None when unknown (no answer, or a broker that keeps none)."""
        from confluent_kafka import KafkaException

        if getattr(self, "_no_topic_ids", False):
            return None
        a = getattr(self, "_admin", None)
        if a is None:
            a = self._admin = open_admin(self.bootstrap, self.kafka, self.auth)
        try:
            return topic_id(a, self.topic)
        except KafkaException as exc:
            if exc.args and exc.args[0].name() == "_UNSUPPORTED_FEATURE":
                self._no_topic_ids = True  # Tansu, the mock: detected by the log's end alone
            return None

    def _with_id(self, offsets: dict, topic_id_: str | None) -> dict:
        return {**offsets, resets.TOPIC_ID: topic_id_} if topic_id_ else offsets

    def initialOffset(self) -> dict:
        """Earliest offsets or log ends of every partition, and the topic's id."""
        marks = self._watermarks()
        if self.starting == "earliest":
            first = {p: marks[p][0] for p in marks}
        else:
            first = self._log_ends(marks)
        return self._with_id(first, self._topic_id())

    def _unavailable(self, start: dict, why: str) -> dict:
        """The topic is gone or leaderless for now: keep Spark's offsets (no batch), say it once."""
        if not getattr(self, "_said_unavailable", False):
            self._said_unavailable = True
            _say(
                f"echo topic {self.topic!r} is unavailable ({why}); its offsets are kept and "
                "it is asked again at each trigger"
            )
        return {k: v for k, v in start.items() if k != resets.RESETS}

    def getDefaultReadLimit(self) -> ReadLimit:
        """``maxRecordsPerBatch`` bounds each micro-batch."""
        return ReadMaxRows(self.max_rows)

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        """Log ends, capped so one batch reads at most the limit's rows; offsets that went back
        are said, and where their partitions are read from again is logged with the batch."""
        from confluent_kafka import KafkaException

        try:
            marks = self._watermarks()
            ends = self._log_ends(marks) if marks else {}
        except KafkaException as exc:
            if not exc.args or exc.args[0].name() not in TOPIC_UNAVAILABLE:
                raise
            return self._unavailable(start, exc.args[0].name())
        if not marks:
            return self._unavailable(start, "no partitions")
        self._said_unavailable = False
        found = resets.plan(start, ends, self._topic_id())
        if found.resets:
            _say(found.line(self.topic))
        read = resets.partition_offsets(start) | {r.partition: r.resume for r in found.resets}
        ends = {p: max(ends[p], read.get(p, 0)) for p in marks}
        if not isinstance(limit, ReadAllAvailable) and isinstance(limit, ReadMaxRows):
            ends = self._capped(ends, read, marks, limit.max_rows)
        # the id seen last: a reset found without one drops it (the next id is no change)
        end = self._with_id(ends, found.new_id or (None if found.resets else found.old_id))
        if found.resets:
            end[resets.RESETS] = {r.partition: r.resume for r in found.resets}
        return end

    @staticmethod
    def _capped(
        end: dict[str, int], read: dict[str, int], marks: dict[str, tuple[int, int]], budget: int
    ) -> dict[str, int]:
        """``end`` capped so the batch reads about ``budget`` records over its partitions."""
        pending = {p: end[p] - max(read.get(p, 0), marks[p][0]) for p in end}
        total = sum(pending.values())
        if total <= budget:
            return end
        out = {}
        for p in end:
            share = budget * pending[p] // total if total else 0
            out[p] = min(end[p], max(read.get(p, 0), marks[p][0]) + max(share, 1))
        return out

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        """Kafka partitions with records, in at most ``maxInputPartitions`` slices, stamped with
        Spark's watermark for this batch and its series plan."""
        watermark_us = batch_watermark_us(self.checkpoint)
        read = resets.read_from(start, end)
        counted = resets.reset_partitions(end)
        offsets = resets.partition_offsets(end)
        ranges = [
            KafkaRange(int(p), read[p], offsets[p])
            for p in sorted(offsets, key=int)
            if offsets[p] > read[p] or int(p) in counted
        ]
        out = slices(ranges, self.max_slices, watermark_us)
        for s in out:
            s.resets = [r.partition for r in s.ranges if r.partition in counted]
            s.topic_id = end.get(resets.TOPIC_ID)
        with_records = [r.partition for r in ranges if r.end > r.start]
        batch = planned_batch_id(self.checkpoint)
        if with_records and self.checkpoint and batch is not None:
            plan = admission.plan(
                self.checkpoint,
                batch,
                watermark_us,
                max(self.windows.resolutions_us.values()),
                self.max_series,
                with_records,
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
        count gaps and resets: the rows before the combiner (``SOURCE_SCHEMA``), one per record,
        gap or partition whose offsets went back."""
        assert isinstance(partition, KafkaSlice)
        wm = partition.watermark_us
        for p in partition.resets:
            yield offsets_reset_row(self.topic, p, wm)
        ranges = [r for r in partition.ranges if r.end > r.start]
        if not ranges:
            return
        plan = partition.series
        cap = admission.TaskAdmission(plan, [r.partition for r in ranges]) if plan else None
        c = self._consumer()
        try:
            planned = partition.topic_id

            def recreated() -> bool:
                now = self._topic_id() if planned else None
                return now is not None and now != planned

            for got in consume_ranges(c, self.topic, ranges, self.stall_timeout_s, recreated):
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
        """Close the metadata client (the AdminClient has no close: it goes with the reader)."""
        c = getattr(self, "_client", None)
        if c is not None:
            c.close()
