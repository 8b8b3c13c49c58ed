"""Reading Spark's offset log: the planned batch and its watermark, from the files Spark writes."""

from __future__ import annotations

import json
from pathlib import Path

from streaming.offset_log import batch_ids, batch_watermark_us, planned_batch_id


def _log(checkpoint: Path, batch: int, watermark_ms: int) -> None:
    (checkpoint / "offsets").mkdir(exist_ok=True)
    meta = {"batchWatermarkMs": watermark_ms, "batchTimestampMs": 1, "conf": {}}
    (checkpoint / "offsets" / str(batch)).write_text(f'v1\n{json.dumps(meta)}\n{{"0":5}}\n')


def test_no_log_means_no_batch_and_watermark_zero(tmp_path: Path) -> None:
    assert batch_ids(str(tmp_path)) == [] and planned_batch_id(None) is None
    assert planned_batch_id(str(tmp_path / "missing")) is None
    assert batch_watermark_us(None) == 0 and batch_watermark_us(str(tmp_path)) == 0


def test_the_last_logged_batch_is_planned_with_its_watermark(tmp_path: Path) -> None:
    for batch, wm in ((0, 0), (9, 9_000), (10, 12_000)):
        _log(tmp_path, batch, wm)
    (tmp_path / "offsets" / ".10.crc").write_text("")  # Spark's checksum files are not batches
    assert batch_ids(str(tmp_path)) == [0, 9, 10]
    assert planned_batch_id(str(tmp_path)) == 10
    assert batch_watermark_us(str(tmp_path)) == 12_000_000
