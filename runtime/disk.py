"""Files written whole or not at all, and a full disk told in one line.

A write that fails part-way (a full disk) must leave neither a cut file nor its temporary file:
:func:`atomic_write` writes beside the target and renames, or removes what it wrote and raises
an ``OSError`` that names the target, not its temporary. Java's and Hadoop's "No space left on
device" name no path (``FileOutputStream.write`` knows none), so the line that reports one adds
the file system the stage's own directories share with the least free space (:func:`fullest`).
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Iterable, Iterator
from pathlib import Path

from runtime.files import size_text

#: What the OS says of a full disk (ENOSPC), in Java's messages and Python's alike.
NO_SPACE = os.strerror(errno.ENOSPC)


@contextlib.contextmanager
def atomic_write(path: str | Path) -> Iterator[Path]:
    """A temporary path beside ``path`` (hidden: ``.NAME.<pid>.tmp``) to write; renamed over
    ``path`` when the block ends, removed when it raises. An ``OSError`` names ``path``."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        yield tmp
        os.replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        if isinstance(exc, OSError) and exc.filename != str(path):
            raise OSError(exc.errno, exc.strerror or str(exc), str(path)) from exc
        raise


def is_full_disk(exc: BaseException) -> bool:
    """Whether ``exc`` is a write that found no space (ENOSPC, or a quota: EDQUOT)."""
    return isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT)


def fullest(places: Iterable[tuple[str, str | None]]) -> str:
    """``FIELD and FIELD (PATH): N free of SIZE``: the file system with the least space free
    among ``places`` ((field, a directory or file) pairs; a field may name several, an empty
    path none), or '' when none can be read."""
    found: dict[int, tuple[int, int, str, list[str]]] = {}
    for field, path in places:
        if not path:
            continue
        at = path if os.path.isdir(path) else os.path.dirname(os.path.abspath(path))
        try:
            fs, dev = os.statvfs(at), os.stat(at).st_dev
        except OSError:
            continue
        free = fs.f_bavail * fs.f_frsize
        entry = found.setdefault(dev, (free, fs.f_blocks * fs.f_frsize, path, []))
        if field not in entry[3]:
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


__all__ = ["NO_SPACE", "atomic_write", "fullest", "is_full_disk"]
