"""What a report reads from the histogram archive directory (the windows: ``streaming.archive``)."""

from __future__ import annotations

from pathlib import Path

from core.config import ConfigError
from core.windows import WindowSpec


def finest_resolution(archive: Path) -> str:
    """The finest resolution present in an archive."""
    found = [d.name.split("=", 1)[1] for d in archive.glob("resolution=*") if d.is_dir()]
    if not found:
        raise ConfigError(f"archive: no windows under {archive}")
    return WindowSpec.from_names(found).finest
