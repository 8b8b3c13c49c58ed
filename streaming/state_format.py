"""The version of what a checkpoint's state holds, checked before Spark starts.

Spark's state store keeps the aggregation's rows as they were written: a job of another state
format cannot read them, and Spark would fail deep in a batch with a long trace. The checkpoint
records its format in ``nines-state.json``; a checkpoint Spark has used without one is of format
1 (one row per HDR bucket, before the marker existed). A mismatch is one line naming the remedy.

Formats:

1. one state row per (resolution, window, series, kind, bucket): sums of count, lost, max, sum.
2. one state row per (window, series, kind) of the finest resolution holding a whole histogram
   (``streaming.wire`` format 1, merged by ``nines_hist_merge``), and the coarser resolutions
   as merges of closed finer windows in a second stateful step.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from core.config import ConfigError
from runtime.files import MAX_SMALL_BYTES, read_text_bounded
from streaming import wire
from streaming.offset_log import batch_ids

STATE_FORMAT = 2
MARKER = "nines-state.json"


def describe(fmt: int) -> str:
    """A format's one-phrase description, for the error line."""
    return {1: "one state row per HDR bucket", 2: "one histogram per state row"}.get(
        fmt, "unknown to this release"
    )


def recorded_format(checkpoint: str) -> int | None:
    """The format the checkpoint holds; None for a checkpoint Spark has not written yet."""
    marker = Path(checkpoint) / MARKER
    if marker.is_file():
        try:
            return int(json.loads(read_text_bounded(marker, MAX_SMALL_BYTES))["state_format"])
        except (ValueError, KeyError, TypeError):
            return -1
    if batch_ids(checkpoint):
        return 1  # written before the marker existed
    return None


def check_state_format(checkpoint: str) -> None:
    """Refuse a checkpoint of another state format (ConfigError, one line); mark a new one."""
    found = recorded_format(checkpoint)
    if found is None:
        Path(checkpoint).mkdir(parents=True, exist_ok=True)
        marker = Path(checkpoint) / MARKER
        tmp = marker.with_name(f".{MARKER}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"state_format": STATE_FORMAT, "histogram_wire": wire.FORMAT}))
        os.replace(tmp, marker)
        return
    if found != STATE_FORMAT:
        raise ConfigError(
            f"stream.checkpoint: {checkpoint} holds state format {found} ({describe(found)}); "
            f"this release keeps format {STATE_FORMAT} ({describe(STATE_FORMAT)}) and cannot "
            "read it: start on a new checkpoint directory (the old one's windows are lost; "
            "set starting_offsets: earliest to re-read what Kafka still holds)"
        )
