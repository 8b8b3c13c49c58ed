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
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from core.config import ConfigError
from runtime.disk import atomic_write
from runtime.files import MAX_SMALL_BYTES, read_text_bounded
from streaming import wire
from streaming.offset_log import batch_ids

if TYPE_CHECKING:
    from streaming.config import StreamConfig

STATE_FORMAT = 2
MARKER = "nines-state.json"
#: The marker's record of the job that wrote the state, each a ``stream:`` setting: the
#: windows and the histograms' layout shape every state row, and the source's offsets are the
#: echo topic's partitions. A restart with another value of one is refused, naming it.
JOB_KEYS = ("echo_topic", "windows", "digits", "lowest_us", "highest")


def job_settings(config: StreamConfig) -> dict[str, Any]:
    """What the marker records of the job (:data:`JOB_KEYS`), as JSON values."""
    return {
        "echo_topic": config.echo_topic,
        "windows": list(config.windows),
        "digits": config.digits,
        "lowest_us": config.lowest_us,
        "highest": config.highest,
    }


def describe(fmt: int) -> str:
    """A format's one-phrase description, for the error line."""
    return {1: "one state row per HDR bucket", 2: "one histogram per state row"}.get(
        fmt, "unknown to this release"
    )


def _marker(checkpoint: str) -> dict[str, Any] | None:
    """The marker's mapping (None without one); a damaged marker is a ConfigError."""
    marker = Path(checkpoint) / MARKER
    if not marker.exists():
        return None
    try:
        data = json.loads(read_text_bounded(marker, MAX_SMALL_BYTES))
    except (OSError, UnicodeDecodeError, ValueError):
        data = None
    if not isinstance(data, dict):
        raise ConfigError(
            f"stream.checkpoint: {checkpoint} is damaged: {MARKER} is not the JSON nines "
            "wrote there; restore it, or start on a new checkpoint directory"
        )
    return data


def recorded_format(checkpoint: str) -> int | None:
    """The format the checkpoint holds; None for a checkpoint Spark has not written yet."""
    marker = _marker(checkpoint)
    if marker is not None:
        try:
            return int(marker["state_format"])
        except (ValueError, KeyError, TypeError):
            return -1
    if batch_ids(checkpoint):
        return 1  # written before the marker existed
    return None


def _write_marker(checkpoint: str, job: Mapping[str, Any] | None) -> None:
    """The marker, written atomically: the state format and the job that writes the state."""
    Path(checkpoint).mkdir(parents=True, exist_ok=True)
    marker = Path(checkpoint) / MARKER
    content: dict[str, Any] = {"state_format": STATE_FORMAT, "histogram_wire": wire.FORMAT}
    if job is not None:
        content["job"] = dict(job)
    with atomic_write(marker) as tmp:  # a full disk leaves no temporary file
        tmp.write_text(json.dumps(content))


def _shown(value: Any) -> str:
    return ",".join(map(str, value)) if isinstance(value, list) else str(value)


def check_state_format(checkpoint: str, job: Mapping[str, Any] | None = None) -> None:
    """Refuse a checkpoint of another state format, or of a job with other ``job`` settings
    (:func:`job_settings`), in one line (ConfigError); mark a new one (and one written before
    the job was recorded)."""
    found = recorded_format(checkpoint)
    if found is None:
        _write_marker(checkpoint, job)
        return
    if found != STATE_FORMAT:
        raise ConfigError(
            f"stream.checkpoint: {checkpoint} holds state format {found} ({describe(found)}); "
            f"this release keeps format {STATE_FORMAT} ({describe(STATE_FORMAT)}) and cannot "
            "read it: start on a new checkpoint directory (the old one's windows are lost; "
            "set starting_offsets: earliest to re-read what Kafka still holds)"
        )
    if job is None:
        return
    recorded = (_marker(checkpoint) or {}).get("job")
    if not isinstance(recorded, dict):
        _write_marker(checkpoint, job)  # marked before the job was recorded: record it now
        return
    for key, value in job.items():
        if key in recorded and recorded[key] != value:
            raise ConfigError(
                f"stream.{key}: {checkpoint} holds the state of a job with {key} "
                f"{_shown(recorded[key])}, not {_shown(value)}: its windows would be misread. "
                f"Set {key} back, or start on a new checkpoint directory"
            )
