"""OS-visible thread names, so ``top -H``, ``ps -L`` and /proc show which probe thread burns CPU.

CPython (before 3.14) leaves every thread named after the executable; librdkafka names its own
(``rdk:broker1``, ...). The probe's threads call :func:`name_os_thread` first thing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys
from collections.abc import Callable
from typing import Any

_PR_SET_NAME = 15  # prctl(2); names are cut to 15 bytes by the kernel
_libc: Any = None


def name_os_thread(name: str) -> None:
    """Name the calling thread in the OS (Linux; a no-op elsewhere or if prctl fails)."""
    global _libc
    if not sys.platform.startswith("linux"):
        return
    if _libc is None:
        _libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    _libc.prctl(_PR_SET_NAME, name.encode()[:15], 0, 0, 0)


def named(name: str, target: Callable[[], None]) -> Callable[[], None]:
    """``target`` run in a thread that first names itself ``name``."""

    def run() -> None:
        name_os_thread(name)
        target()

    return run
