"""Closed windows leave the job through its sink: windows with rollups, counters, then health."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa
from test_closed_windows import SCHEMA, encoded  # the rows Spark hands foreachBatch

from core.windows import ALL_PARTITIONS, WindowHistogram
from streaming.config import StreamConfig
from streaming.counters import StreamCounters
from streaming.job import StreamJob
from streaming.sink import WindowSink

END_S = 1_800_000_010


def row(kind: str, count: int, partition: str = "0") -> dict[str, Any]:
    return {
        "resolution": "10s",
        "window_end": datetime.fromtimestamp(END_S, UTC),
        "cluster": "c",
        "topic": "t",
        "partition": partition,
        "kind": kind,
        "hist": encoded([1000 if kind == "e2e" else 0] * count),
    }


class Batch:
    """What foreachBatch hands the job: a DataFrame of one micro-batch's aggregate rows."""

    def __init__(self, rows: list[dict[str, Any]]) -> None:
        self.rows = rows

    def toArrow(self) -> pa.Table:
        return pa.Table.from_pylist(self.rows, SCHEMA)


class Query:
    """A Spark query's last progress, as the job reads its health from it."""

    def __init__(self) -> None:
        self.lastProgress = {
            "durationMs": {"triggerExecution": 1500},
            "inputRowsPerSecond": 250.0,
            "eventTime": {},
            "stateOperators": [{"numRowsTotal": 7}, {"numRowsTotal": 5}],
        }


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def update(self, windows: Sequence[WindowHistogram], counters: StreamCounters) -> None:
        self.calls.append(("update", (list(windows), counters)))

    def set_pipeline_health(
        self,
        batch_duration_s: float,
        input_rows_per_s: float,
        watermark_lag_s: float,
        state_rows: int,
        last_batch_ts: float | None = None,
    ) -> None:
        self.calls.append(
            ("health", (batch_duration_s, input_rows_per_s, watermark_lag_s, state_rows))
        )


def test_the_job_hands_windows_counters_and_health_to_its_sink() -> None:
    sink = Recorder()
    typed: WindowSink = sink  # the Protocol is what the job asks for
    job = StreamJob(
        StreamConfig.model_validate({"bootstrap": "x:1", "windows": "10s,1m"}), sink=typed
    )
    job.query = Query()
    seen: list[int] = []
    job.on_batch = lambda batch_id, windows, counters: seen.append(batch_id)
    job._sink(Batch([row("e2e", 3), row("e2e", 2, partition="1"), row("stat:late", 4)]), 7)

    assert [name for name, _ in sink.calls] == ["update", "health"]
    windows, counters = sink.calls[0][1]
    assert sorted(w.series.partition for w in windows) == ["0", "1", ALL_PARTITIONS]
    assert counters.echoes == {("c", "t", "0"): 3, ("c", "t", "1"): 2}
    assert counters.late == {("c", "t", "0"): 4}
    assert sink.calls[1][1] == (1.5, 250.0, 0.0, 12)
    assert job.batches == 1 and seen == [7]


def test_a_job_without_sink_still_hands_batches_out() -> None:
    job = StreamJob(StreamConfig.model_validate({"bootstrap": "x:1", "windows": "10s"}))
    job.query = Query()
    got: list[list[WindowHistogram]] = []
    job.on_batch = lambda batch_id, windows, counters: got.append(windows)
    job._sink(Batch([row("e2e", 3)]), 0)
    assert [len(ws) for ws in got] == [2]  # the partition and its topic rollup
