"""The probe's threads: OS-visible names, and a death that ends the process.

CPython (before 3.14) leaves every thread named after the executable; librdkafka names its own
(``rdk:broker1``, ...). The probe's threads call :func:`name_os_thread` first thing, so
``top -H``, ``ps -L`` and /proc show which one burns CPU.

A thread of the probe that dies stops its part of the probing for good (a dead sender sends
nothing, a dead housekeeper declares no loss) while the others carry on: :class:`Deaths` keeps
the first, and the probe stops on it with one line and a non-zero exit status, so a supervisor
sees a failure, never a clean stop.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import sys
import threading
from collections.abc import Callable
from typing import Any

log = logging.getLogger("nines.probe")

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


class Deaths:
    """The threads that died, and of what; ``event`` (a new one unless given) is set at the
    first."""

    def __init__(self, event: threading.Event | None = None) -> None:
        self.event = threading.Event() if event is None else event
        #: ``thread NAME died: Type: message`` of the first to die (one line), else None.
        self.first: str | None = None
        self._lock = threading.Lock()

    def died(self, name: str, exc: BaseException) -> None:
        """Record the death of thread ``name`` (its traceback goes to the log at DEBUG)."""
        text = " ".join(f"{type(exc).__name__}: {exc}".split())  # one line, whatever it says
        with self._lock:
            if self.first is None:
                self.first = f"thread {name} died: {text}"
        log.debug("thread %s died", name, exc_info=exc)
        self.event.set()


def named(
    name: str, target: Callable[[], None], deaths: Deaths | None = None
) -> Callable[[], None]:
    """``target`` run in a thread that first names itself ``name``; with ``deaths``, an
    exception that ends it is recorded there instead of printed as a traceback."""

    def run() -> None:
        try:
            name_os_thread(name)
            target()
        except BaseException as exc:
            if deaths is None:
                raise
            deaths.died(name, exc)

    return run
