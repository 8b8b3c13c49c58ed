"""What every broker child process needs before ``exec``: signals back, and death with us."""

from __future__ import annotations

import contextlib
import ctypes
import signal

_PR_SET_PDEATHSIG = 1


def child_setup() -> None:
    """In the child: take SIGTERM/SIGINT again (``nines broker`` blocks them for sigwait, and
    a blocked mask survives exec) and die with the parent, even if it is SIGKILLed
    (PR_SET_PDEATHSIG, Linux only; it fires when the forking *thread* ends)."""
    signal.pthread_sigmask(signal.SIG_SETMASK, set())
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
