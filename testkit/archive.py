"""A whole archive in one call: tests and benches need it; the product (report, slo) scans."""

from __future__ import annotations

from pathlib import Path

from core.windows import WindowHistogram
from streaming.archive_read import scan_windows


def read_windows(
    archive_dir: str | Path,
    resolution: str | None = None,
    start_us: int | None = None,
    end_us: int | None = None,
    brokers: bool = False,
) -> list[WindowHistogram]:
    """Archived windows overlapping [start_us, end_us); ArchiveError on the first bad file."""
    return scan_windows(archive_dir, resolution, start_us, end_us, brokers).windows
