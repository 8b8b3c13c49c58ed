"""The archive's lifecycle settings: defaults in the stream config, bad values one line, exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from monitor.cli import main
from streaming.config import StreamConfig


def test_defaults() -> None:
    c = StreamConfig(bootstrap="k:9092")
    assert (c.archive_retention, c.archive_compact, c.archive_max_size) == (35 * 86_400, True, None)
    c = StreamConfig(bootstrap="k:9092", archive_retention="7d", archive_max_size="8GiB")
    assert (c.archive_retention, c.archive_max_size) == (7 * 86_400, 8 * 2**30)


@pytest.mark.parametrize(
    ("yaml", "message"),
    [
        ("archive_retention: 0s", "stream.archive_retention: must be > 0 and finite (got '0s')"),
        ("archive_retention: .inf", "stream.archive_retention: not a duration: inf (must be "
         "finite; use e.g. 500ms, 10s, 1m, 2h)"),
        ("archive_retention: [1]", "stream.archive_retention: not a duration (use e.g. 35d, "
         "720h) (got a list)"),
        ("archive_max_size: 0", "stream.archive_max_size: must be > 0 (or null: no cap)"),
        ("archive_max_size: lots", "stream.archive_max_size: not a size: 'lots' (use e.g. 512, 1KiB, 1MiB)"),  # noqa: E501
        ("archive_compact: maybe", "stream.archive_compact: Input should be a valid boolean, unable to interpret input (got 'maybe')"),  # noqa: E501
    ],
)  # fmt: skip
def test_bad_values_are_one_line_exit_2(
    yaml: str, message: str, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "nines.yaml"
    path.write_text(f"stream:\n  {yaml}\n")
    code = main(["stream", "--bootstrap", "127.0.0.1:9", "--config", str(path)])
    out = capfd.readouterr()
    assert (code, out.err, out.out) == (2, f"nines stream: error: {message}\n", "")


def test_the_sink_archives_through_one_writer_with_the_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """StreamJob's foreachBatch body, no Spark: each batch written, closed hours compacted."""
    import numpy as np

    from core.hdr import HdrLayout, SparseHistogram
    from core.windows import SeriesKey, WindowHistogram
    from streaming import job as job_module

    hour, span = 3_600_000_000, 10_000_000
    t0 = 1_795_000_000_000_000 // hour * hour
    batches = {
        b: [
            WindowHistogram(
                "10s", t0 + b * span, t0 + (b + 1) * span, SeriesKey("c", "t", "0", "e2e"),
                SparseHistogram.from_values(HdrLayout(), np.arange(1, 100 + b)),
            )
        ]
        for b in range(361)  # the last closes the first hour
    }  # fmt: skip
    monkeypatch.setattr(job_module, "closed_windows", lambda arrow, *_a: (batches[arrow], None))

    class Batch:
        def __init__(self, b: int) -> None:
            self.b = b

        def toArrow(self) -> int:  # Spark's DataFrame method
            return self.b

    config = StreamConfig(bootstrap="k:9092", archive=str(tmp_path), archive_retention="400d")
    job = job_module.StreamJob(config, spark=object())
    for b in batches:
        job._sink(Batch(b), b)
    from streaming.archive_files import hour_dir
    from testkit.archive import read_windows

    first, second = hour_dir(tmp_path, "10s", t0), hour_dir(tmp_path, "10s", t0 + hour)
    assert [p.name for p in first.iterdir()] == ["compact-000000000-000000359.parquet"]
    assert [p.name for p in second.iterdir()] == ["batch-000000360.parquet"]

    assert [w.hist.total for w in read_windows(tmp_path)] == [99 + b for b in batches]
