"""A full disk, told in one line: which of a stage's directories is on it, and what is free.

Java's and Hadoop's "No space left on device" name no path (``FileOutputStream.write`` knows
none), so the line that reports one adds the file system the stage's own directories share
with the least free space, named by the fields that point there.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Mapping

from runtime.files import size_text

#: What the OS says of a full disk (ENOSPC), in Java's messages and Python's alike.
NO_SPACE = os.strerror(errno.ENOSPC)


def is_full_disk(exc: BaseException) -> bool:
    """Whether ``exc`` is a write that found no space (ENOSPC, or a quota: EDQUOT)."""
    return isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT)


def fullest(places: Mapping[str, str | None]) -> str:
    """``FIELD and FIELD (PATH): N free of SIZE``: the file system with the least space free
    among ``places`` (field → a directory or file; empty ones are left out), or '' when none
    can be read."""
    found: dict[int, tuple[int, int, str, list[str]]] = {}
    for field, path in places.items():
        if not path:
            continue
        at = path if os.path.isdir(path) else os.path.dirname(os.path.abspath(path))
        try:
            fs, dev = os.statvfs(at), os.stat(at).st_dev
        except OSError:
            continue
        free = fs.f_bavail * fs.f_frsize
        entry = found.setdefault(dev, (free, fs.f_blocks * fs.f_frsize, path, []))
        entry[3].append(field)
    if not found:
        return ""
    free, total, path, fields = min(found.values(), key=lambda e: e[0])
    return f"{' and '.join(fields)} ({path}): {_size(free)} free of {_size(total)}"


def _size(n_bytes: int) -> str:
    """Bytes as a person reads them: ``0 bytes``, ``12 KiB``, ``1.5 GiB``."""
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n_bytes >= size:
            return f"{n_bytes / size:.3g} {unit}"
    return size_text(n_bytes)


__all__ = ["NO_SPACE", "fullest", "is_full_disk"]
