"""A replay source: pre-parsed echoes from an Arrow IPC file, one fixed slice per micro-batch.

It measures (and tests) the job's aggregation apart from Kafka: the rows are exactly what
``streaming.source`` hands on (``SOURCE_SCHEMA``), so everything downstream runs unchanged.
``spark.readStream.format("nines-replay").option("path", F).option("rowsPerBatch", N)``; the
file is memory-mapped by each reader, and batch *k* covers rows ``[k·N, (k+1)·N)``, split in
``splits`` input partitions. The file must be on a path every executor can read.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadLimit, ReadMaxRows

from core.hdr import HdrLayout
from core.windows import WindowSpec
from streaming.combine import Combiner
from streaming.marks import SOURCE_SCHEMA
from streaming.source import spark_schema

#: Rows per Arrow batch handed to Spark.
CHUNK_ROWS = 100_000


class RowRange(InputPartition):
    """Rows [start, end) of the replay file."""

    def __init__(self, start: int, end: int) -> None:
        super().__init__(start)
        self.start, self.end = start, end


def write_replay_file(path: str | Path, table: pa.Table) -> int:
    """Write ``table`` (``SOURCE_SCHEMA``) as an Arrow IPC file; returns its row count."""
    table = table.select(SOURCE_SCHEMA.names).cast(SOURCE_SCHEMA)
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, SOURCE_SCHEMA) as writer:
        writer.write_table(table, max_chunksize=CHUNK_ROWS)
    return table.num_rows


def _rows_in(path: str) -> int:
    with pa.memory_map(path) as source:
        return int(pa.ipc.open_file(source).read_all().num_rows)


class ReplayDataSource(DataSource):
    """``format("nines-replay")``: echoes replayed from an Arrow IPC file."""

    @classmethod
    def name(cls) -> str:
        """Format name."""
        return "nines-replay"

    def schema(self) -> Any:
        """The Kafka source's schema."""
        return spark_schema()

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        """A reader over the file."""
        return ReplayReader(dict(self.options))


class ReplayReader(DataSourceStreamReader):
    """Offsets are row numbers; each micro-batch takes the next ``rowsPerBatch`` rows."""

    def __init__(self, options: dict[str, str]) -> None:
        opts = {k.lower(): v for k, v in options.items()}
        self.path = opts["path"]
        self.rows_per_batch = int(opts.get("rowsperbatch", "1000000"))
        self.splits = int(opts.get("splits", "2"))
        self.windows = WindowSpec.from_option(opts["windows"])
        self.layout = HdrLayout.from_option(opts["hdr"]) if "hdr" in opts else HdrLayout()
        self.total = _rows_in(self.path)

    def initialOffset(self) -> dict:
        """From the first row."""
        return {"row": 0}

    def getDefaultReadLimit(self) -> ReadLimit:
        """``rowsPerBatch`` rows per micro-batch."""
        return ReadMaxRows(self.rows_per_batch)

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        """The next batch's worth of rows after ``start``, never past the end of the file."""
        rows = limit.max_rows if isinstance(limit, ReadMaxRows) else self.rows_per_batch
        return {"row": min(self.total, int(start["row"]) + rows)}

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        """``splits`` equal row ranges."""
        lo, hi = int(start["row"]), int(end["row"])
        step = max(1, -(-(hi - lo) // self.splits))
        return [RowRange(a, min(hi, a + step)) for a in range(lo, hi, step)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """The partition's rows, memory-mapped, in chunks, through the Kafka reader's combiner."""
        assert isinstance(partition, RowRange)
        combiner = Combiner(self.windows, self.layout)
        with pa.memory_map(self.path) as source:
            table = pa.ipc.open_file(source).read_all()
            for offset in range(partition.start, partition.end, CHUNK_ROWS):
                length = min(CHUNK_ROWS, partition.end - offset)
                for batch in table.slice(offset, length).combine_chunks().to_batches():
                    yield from combiner.add(batch)
        yield from combiner.finish()

    def commit(self, end: dict) -> None:
        """Nothing to acknowledge."""
