"""A SIGTERM or SIGINT during start-up ends ``nines`` quietly: exit 0, no traceback.

Until a long-running command installs its own handlers, the signal raises ``SystemExit(0)``
wherever the main thread is. A library may turn that into an error of its own (pydantic-core
wraps it in a ``SchemaError`` when it lands while a model's validator is built), so the request
is also remembered: the entry point exits 0 on whatever exception the interruption became.
This module imports nothing heavy, so ``python -m monitor`` installs it before its imports.
"""

from __future__ import annotations

import signal
from types import FrameType
from typing import Any

SIGNALS = (signal.SIGTERM, signal.SIGINT)

_requested = False


def handler(_signum: int, _frame: FrameType | None) -> None:
    """Remember the stop, then unwind the start-up."""
    global _requested
    _requested = True
    raise SystemExit(0)


def requested() -> bool:
    """Whether a stop signal arrived while this module's handler was installed."""
    return _requested


def served() -> None:
    """Forget the stop: the command it asked to end has ended (an in-process caller's next
    command starts afresh)."""
    global _requested
    _requested = False


def install() -> dict[signal.Signals, Any]:
    """Take SIGTERM and SIGINT over; return the handlers they had (for an in-process caller)."""
    global _requested
    _requested = False
    return {sig: signal.signal(sig, handler) for sig in SIGNALS}
