"""What a report reads from the histogram archive: the resolution, the windows, the bad files.

Files are chosen by path before any is opened (``streaming.archive_read.scan_windows``). A file that
cannot be read, has another schema or holds an inconsistent histogram stops the command with
one line naming it, unless the user passes ``--skip-bad``: then it is left out whole, named in a
warning, and counted on the output itself (docs/configuration.md, "Bad archive files").
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

from core.config import ConfigError
from core.printable import printable
from core.units import parse_duration_s
from core.windows import WindowHistogram, WindowSpec
from streaming.archive_files import ArchiveError
from streaming.archive_read import iter_windows

SKIP_HINT = "move it away, or pass --skip-bad to leave it out with a warning"


def check_archive_dir(archive: Path) -> None:
    """Refuse, in one line, an archive path that is no directory (a FIFO, a device, a file)."""
    if archive.exists() and not archive.is_dir():
        raise ConfigError(f"archive: {archive} is not a directory")


def finest_resolution(archive: Path) -> str:
    """The finest resolution present in an archive (directories of other names are not ours).

    The archive's resolutions are read as the stream job's ``WindowSpec``, which owns "finest".
    """
    check_archive_dir(archive)
    names = []
    for d in archive.glob("resolution=*"):
        name = d.name.split("=", 1)[1]
        try:
            seconds = parse_duration_s(name)
        except ValueError:
            continue
        if d.is_dir() and seconds > 0:
            names.append(name)
    if not names:
        raise ConfigError(f"archive: no windows under {archive}")
    try:
        return WindowSpec.from_names(names).finest
    except ValueError as exc:
        raise ConfigError(
            f"archive: resolutions {','.join(sorted(names))} under {archive}: {exc}; "
            "choose one with --resolution"
        ) from None


def load_windows(
    archive: Path,
    resolution: str,
    start_us: int | None,
    end_us: int | None,
    skip_bad: bool,
    command: str,
) -> tuple[list[WindowHistogram], list[ArchiveError]]:
    """The windows of the span and the files left out; a bad file is a ConfigError unless skipped.

    Each skipped file is one warning line on stderr (``nines COMMAND: warning: ...``).
    """
    bad: list[ArchiveError] = []
    read = stream_windows(archive, resolution, start_us, end_us, skip_bad, command, bad)
    return sorted(read, key=lambda w: w.sort_key), bad  # as scan_windows sorts them


def stream_windows(
    archive: Path,
    resolution: str,
    start_us: int | None,
    end_us: int | None,
    skip_bad: bool,
    command: str,
    bad: list[ArchiveError],
) -> Iterator[WindowHistogram]:
    """``load_windows``' windows an hour at a time, unsorted, for a caller that merges them as
    they come; the files left out are appended to ``bad`` and warned about at the end."""
    check_archive_dir(archive)
    found: list[ArchiveError] = []
    try:
        yield from iter_windows(
            archive, resolution, start_us, end_us, bad=found if skip_bad else None
        )
    except ArchiveError as exc:
        raise ConfigError(f"archive: {exc}; {SKIP_HINT}") from None
    for b in found:
        print(printable(f"nines {command}: warning: archive: skipped {b}"), file=sys.stderr)
    bad.extend(found)


def skipped_note(bad: Sequence[ArchiveError]) -> str:
    """What the output itself says about skipped files ('' when none were)."""
    if not bad:
        return ""
    files = "file" if len(bad) == 1 else "files"
    return f"; {len(bad)} bad archive {files} skipped, their windows left out"
