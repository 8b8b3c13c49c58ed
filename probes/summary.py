"""The probe's summary file: its totals at a clean stop, for the process that started it.

``nines probe --summary-file PATH`` writes one JSON object when the probe stops cleanly
(SIGTERM, SIGINT or the end of ``--duration``), atomically (a temporary file renamed over
``PATH``), so a reader sees the whole file or none. A probe that crashed or was killed writes
none. The format (``format`` 1; docs/configuration.md, *The probe's summary file*)::

    {"format": 1, "sent": 1000, "received": 990, "lost": 7, "unresolved": 3,
     "echo_records_published": 997, "echo_dropped": 2}

``sent``, ``received`` and ``lost`` are summed over the probed partitions; ``unresolved`` were
still in flight when the shutdown timeout ran out (they have no echo record); ``handoff_lost``
(a fleet replica's, ``probes.fleet``) were in flight to a partition the fleet moved away. The
``stopped:`` log line shows the same totals to humans; no program should parse it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from core.config import ConfigError
from runtime.disk import atomic_write
from runtime.files import MAX_SMALL_BYTES, read_text_bounded

FORMAT = 1
#: The totals, in the order the log line shows them.
FIELDS = (
    "sent",
    "received",
    "lost",
    "unresolved",
    "echo_records_published",
    "echo_dropped",
    "handoff_lost",
)
#: Fields added within format 1: a file written before them reads as 0.
ADDED = frozenset({"handoff_lost"})


def check_writable(path: str | None) -> None:
    """Refuse (ConfigError, one line) a summary file that could not be written at the stop."""
    if path is None:
        return
    parent = Path(path).parent
    if not parent.is_dir() or not os.access(parent, os.W_OK):
        raise ConfigError(
            f"probe.summary_file: cannot write {path}: {parent} is not a writable directory"
        )


def write_summary(path: str | Path, totals: dict[str, int]) -> None:
    """Write ``totals`` (every one of ``FIELDS``) as the summary file, atomically; one that
    cannot be written (a full disk) is a ConfigError naming it, and leaves no file."""
    data = {"format": FORMAT, **{k: int(totals[k]) for k in FIELDS}}
    try:
        with atomic_write(path) as tmp:
            tmp.write_text(json.dumps(data) + "\n")
    except OSError as exc:  # a full disk: no file, no temporary, one line
        raise ConfigError(f"probe.summary_file: cannot write {path}: {exc.strerror}") from None


def read_summary(path: str | Path) -> dict[str, int]:
    """The totals of a summary file; {} when there is none (the probe did not stop cleanly).

    A file of another format raises ValueError rather than be misread.
    """
    try:
        data = json.loads(read_text_bounded(path, MAX_SMALL_BYTES))
    except FileNotFoundError:
        return {}
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ValueError(f"{path}: not a probe summary of format {FORMAT}")
    return {k: int(data[k] if k not in ADDED else data.get(k, 0)) for k in FIELDS}
