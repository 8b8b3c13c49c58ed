"""The demo's processes: the probe as a child, the JVM's output to a file, a clean stop on signals.

Process and file-descriptor handling only; what the demo shows lives in ``monitor.terminal_tables``.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def jvm_output_to(path: Path) -> Iterator[None]:
    """Point this process's stderr (fd 2) at ``path`` while the Spark JVM is launched.

    PySpark starts the JVM with our stderr inherited, and log4j writes to it before any config
    of ours applies; the JVM (and the Python workers it spawns) keep the file, our own stderr
    comes back afterwards. The screen then stays the product's.
    """
    import os

    sys.stderr.flush()
    saved = os.dup(2)
    with open(path, "ab") as log:
        os.dup2(log.fileno(), 2)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # no "hostname resolves to loopback"
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)


def probe_argv(bootstrap: str, probe_id: str, *args: str) -> list[str]:
    """argv of ``nines probe`` as its own process, metrics on a free port unless ``args`` name
    one (the last ``--metrics-port`` wins)."""
    head = [sys.executable, "-m", "monitor", "probe", "--bootstrap", bootstrap]
    return [*head, "--probe-id", probe_id, "--metrics-port", "0", *args]


@contextlib.contextmanager
def probe_process(bootstrap: str, rate: str, log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """The demo's probe, its stderr to ``log``; stopped on leaving."""
    cmd = probe_argv(bootstrap, "demo", "--rate", str(rate), "--loss-timeout", "10s")
    cmd += ["--cluster", "demo"]
    with open(log, "ab") as log_file:  # a pipe nobody reads would block the probe when full
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=log_file)
    try:
        time.sleep(0.5)
        if proc.poll() is not None:
            err = log.read_text(errors="replace").strip()
            raise RuntimeError(f"the probe failed to start: {err}")
        yield proc
    finally:
        terminate(proc)


def terminate(proc: subprocess.Popen[bytes], timeout_s: float = 15) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class StopFlag:
    """Set by SIGINT/SIGTERM so the demo stops at a clean point."""

    def __init__(self) -> None:
        self.set = False
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, self._handle)

    def _handle(self, *_: object) -> None:
        self.set = True
