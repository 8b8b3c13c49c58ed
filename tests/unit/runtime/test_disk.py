"""A full disk's line names the file system the stage's directories share with the least space."""

from __future__ import annotations

import errno
import os
from pathlib import Path

from runtime.disk import fullest, is_full_disk


def test_the_fields_on_one_file_system_are_named_together(tmp_path: Path) -> None:
    (tmp_path / "ckpt").mkdir()
    places = [
        ("stream.checkpoint", str(tmp_path / "ckpt")),
        ("stream.checkpoint", str(tmp_path / "ckpt" / "state")),  # a field named once
        ("stream.spark_log", str(tmp_path / "spark.log")),  # a file not yet written: its directory
        ("stream.archive", ""),  # not set
    ]
    line = fullest(places)
    assert line.startswith(f"stream.checkpoint and stream.spark_log ({tmp_path / 'ckpt'}): ")
    fs = os.statvfs(tmp_path)
    assert " free of " in line and line.endswith(("B", "bytes")), line
    assert fs.f_blocks > 0


def test_the_fullest_of_two_file_systems_wins(tmp_path: Path) -> None:
    # /dev/shm or /proc: another device than tmp_path's, with its own free space
    other = "/proc" if os.stat("/proc").st_dev != os.stat(tmp_path).st_dev else None
    assert other is not None
    line = fullest([("a", str(tmp_path)), ("b", other)])
    free = {p: os.statvfs(p).f_bavail * os.statvfs(p).f_frsize for p in (str(tmp_path), other)}
    assert line.startswith("b (/proc)" if free[other] <= free[str(tmp_path)] else "a ("), line


def test_nothing_readable_is_no_note(tmp_path: Path) -> None:
    assert fullest([("a", ""), ("b", str(tmp_path / "gone" / "deeper"))]) == ""


def test_enospc_and_a_quota_are_a_full_disk() -> None:
    assert is_full_disk(OSError(errno.ENOSPC, "No space left on device"))
    assert is_full_disk(OSError(errno.EDQUOT, "Disk quota exceeded"))
    assert not is_full_disk(OSError(errno.EACCES, "Permission denied"))
    assert not is_full_disk(ValueError("No space left on device"))
