"""Spark's offset log, read: the batch being planned and its event-time watermark.

Spark writes ``<checkpoint>/offsets/<batch id>`` before it plans the batch's partitions: a
version line, one JSON line of batch metadata (``batchWatermarkMs`` among it), then each
source's offsets. A replay reads the same file, so what is derived from it is deterministic.
"""

from __future__ import annotations

import json
from pathlib import Path

from runtime.files import MAX_STATE_BYTES, read_text_bounded


def batch_ids(checkpoint: str) -> list[int]:
    """Ids of the batches Spark logged, in order (empty before the first or without a log)."""
    try:
        return sorted(
            int(p.name) for p in (Path(checkpoint) / "offsets").iterdir() if p.name.isdigit()
        )
    except (FileNotFoundError, NotADirectoryError):
        return []


def planned_batch_id(checkpoint: str | None) -> int | None:
    """Id of the batch being planned: the last one in Spark's offset log (None before any)."""
    ids = batch_ids(checkpoint) if checkpoint else []
    return ids[-1] if ids else None


def batch_watermark_us(checkpoint: str | None) -> int:
    """Spark's event-time watermark for the batch being planned (0 before the first)."""
    batch = planned_batch_id(checkpoint)
    if batch is None:
        return 0
    entry = Path(str(checkpoint)) / "offsets" / str(batch)
    lines = read_text_bounded(entry, MAX_STATE_BYTES).splitlines()
    return int(json.loads(lines[1]).get("batchWatermarkMs", 0)) * 1000
