"""A real full disk for the tests: a tmpfs mounted for one test (root, as CI runs), filled to
its last byte by a filler file, grown when the test says space returns."""

from __future__ import annotations

import errno
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from real_components import in_ci, require_tool


@contextmanager
def tmpfs(where: Path, size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` (mount's ``2m``) mounted on ``where`` (made), unmounted after."""
    if os.geteuid() != 0:
        message = "mounting a tmpfs needs root"
        if in_ci():
            pytest.fail(f"{message}: CI runs as root")
        pytest.skip(message)
    require_tool("mount", "util-linux")
    where.mkdir(parents=True, exist_ok=True)
    mount = ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)]
    subprocess.run(mount, check=True)
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def grow(where: Path, size: str) -> None:
    """Give the tmpfs at ``where`` more room: space returns, its files stay."""
    subprocess.run(["mount", "-o", f"remount,size={size}", str(where)], check=True)


def fill(directory: Path) -> int:
    """Write a filler file until the file system has no byte left; its size."""
    written = 0
    with open(directory / "filler", "wb", buffering=0) as f:
        for chunk in (1 << 16, 1 << 12, 1):  # pages, then the last bytes of a page
            try:
                while True:
                    written += f.write(b"\0" * chunk)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC, exc
    assert os.statvfs(directory).f_bavail == 0
    return written


def left_besides_filler(directory: Path) -> list[str]:
    """Every name under ``directory`` but the filler's: what a failed write left."""
    return sorted(str(p.relative_to(directory)) for p in directory.rglob("*") if p.name != "filler")
