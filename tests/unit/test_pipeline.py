"""The stream pipeline: the job's windows reach the exporter and /metrics, without Spark here."""

from __future__ import annotations

import urllib.request
from datetime import UTC, datetime

import pyarrow as pa
import pytest

from monitor.pipeline import PipelineConfig, StreamPipeline
from streaming.wire import encode


def batch(end_s: int) -> object:
    """A micro-batch of aggregate rows as foreachBatch hands it over: one 10s e2e window."""
    row = {
        "resolution": "10s",
        "window_end": datetime.fromtimestamp(end_s, UTC),
        "cluster": "c",
        "topic": "t",
        "partition": "0",
        "kind": "e2e",
        # 5 samples in bucket 1000, 1 lost, max 1000 µs, sum 5000 µs (streaming.wire)
        "hist": encode([1], [1000], [5000], [0, 1], [1000], [5])[0].as_py(),
    }

    class Batch:
        def toArrow(self) -> pa.Table:
            return pa.Table.from_pylist([row])

    return Batch()


def test_the_pipeline_serves_what_the_job_hands_out(monkeypatch: pytest.MonkeyPatch) -> None:
    pipeline = StreamPipeline(
        PipelineConfig.model_validate(
            {
                "bootstrap": "x:1",
                "windows": "10s,1m",
                "metrics_port": 0,
                "partition_histograms": True,
            }
        )
    )
    assert pipeline.job.sink is pipeline.exporter
    assert pipeline.exporter.config.partition_histograms
    assert pipeline.exporter.windows.finest == "10s"
    monkeypatch.setattr(pipeline.job, "start", lambda: pipeline.job)  # no Spark in a unit test
    pipeline.start()
    try:
        assert pipeline.metrics_port
        pipeline.job._sink(batch(1_800_000_010), 0)
        url = f"http://127.0.0.1:{pipeline.metrics_port}/metrics"
        body = urllib.request.urlopen(url, timeout=5).read().decode()
        assert 'nines_latency_window_samples{cluster="c",kind="e2e",partition="0"' in body
        assert 'nines_echoes_total{cluster="c",partition="0",topic="t"} 5.0' in body
        assert 'nines_latency_classic_seconds_count{cluster="c",kind="e2e",partition="0"' in body
        (latest,) = pipeline.latest_windows()["10s"][:1]
        assert latest.window_end_us == 1_800_000_010_000_000
    finally:
        pipeline.stop()
    assert pipeline.metrics_port is None


def test_a_failed_start_closes_the_metrics_server(monkeypatch: pytest.MonkeyPatch) -> None:
    pipeline = StreamPipeline(PipelineConfig(bootstrap="x:1", metrics_port=0))

    def fail() -> None:
        raise RuntimeError("no Spark")

    monkeypatch.setattr(pipeline.job, "start", fail)
    with pytest.raises(RuntimeError):
        pipeline.start()
    assert pipeline.server is None
