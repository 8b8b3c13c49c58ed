"""Signal a real nines process as a user, a terminal or Kubernetes would, and read how it ended."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from testkit.sigint import default_sigint

ROOT = Path(__file__).resolve().parents[1]
#: What must never appear on a stopped process's output.
TRACES = ("Traceback", "Exception", "ERROR", "\tat org.apache")


@dataclass(frozen=True)
class Ending:
    returncode: int | str
    stop_s: float
    output: str


def signal_nines(
    args: list[str],
    sig: signal.Signals,
    *,
    group: bool,
    ready: str | None,
    tmp: Path,
    timeout_s: float = 180,
    delay_s: float = 0.3,
) -> Ending:
    """Run ``nines ARGS`` (``python -m monitor``) in a process group of its own; once ``ready``
    shows in its output (or after ``delay_s`` when None: mid start-up), send ``sig`` to it or to
    its whole group; return its exit status, how long it took to end, and its output."""
    log = tmp / f"nines-{args[0]}-{sig.name}.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "monitor", *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            start_new_session=True,
            preexec_fn=default_sigint,  # as a terminal starts it, however this run was started
        )
    try:
        deadline = time.monotonic() + timeout_s
        if ready is None:
            time.sleep(delay_s)
        else:
            while ready not in log.read_text(errors="replace"):
                assert proc.poll() is None, log.read_text(errors="replace")[-3000:]
                assert time.monotonic() < deadline, log.read_text(errors="replace")[-3000:]
                time.sleep(0.2)
        t = time.monotonic()
        if group:
            os.killpg(proc.pid, sig)
        else:
            proc.send_signal(sig)
        try:
            rc: int | str = proc.wait(90)
        except subprocess.TimeoutExpired:
            rc = "still running 90 s after the signal"
        return Ending(rc, time.monotonic() - t, log.read_text(errors="replace"))
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def assert_clean(ending: Ending) -> None:
    """Exit 0 and no stack trace."""
    assert ending.returncode == 0, ending.output[-3000:]
    assert not [t for t in TRACES if t in ending.output], ending.output[-3000:]
