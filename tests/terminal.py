"""A real interactive shell on a pseudo-terminal, for tests where job control matters.

Ctrl+Z in a terminal is the kernel's line discipline sending SIGTSTP to the foreground process
group, and ``fg`` is the shell sending SIGCONT to it: only a shell with job control on a
terminal does either, so the test types them, as a person would.
"""

from __future__ import annotations

import contextlib
import os
import pty
import select
import signal
import time

from testkit.sigint import default_sigint


class Terminal:
    """``bash -i`` on a pty: ``type`` keys, ``read`` the screen, ``close`` the session."""

    def __init__(self, cwd: str, env: dict[str, str] | None = None) -> None:
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # the child: an interactive shell, no rc files
            default_sigint()  # a terminal's shell hears Ctrl+C, however this run was started
            os.chdir(cwd)
            os.execvpe("bash", ["bash", "--norc", "--noprofile", "-i"], env or dict(os.environ))
        self.screen = ""

    def type(self, keys: str) -> None:
        os.write(self.fd, keys.encode())

    def read(self, timeout_s: float = 0.2) -> str:
        """Whatever the terminal printed within ``timeout_s``, added to ``screen``."""
        deadline = time.monotonic() + timeout_s
        while (left := deadline - time.monotonic()) > 0:
            ready, _, _ = select.select([self.fd], [], [], left)
            if not ready:
                break
            try:
                chunk = os.read(self.fd, 65536).decode(errors="replace")
            except OSError:
                break
            self.screen += chunk
        return self.screen

    def wait_for(self, text: str, timeout_s: float) -> str:
        deadline = time.monotonic() + timeout_s
        while text not in self.screen:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{text!r} not on the screen: {self.screen[-2000:]!r}")
            self.read(0.2)
        return self.screen

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.kill(self.pid, signal.SIGHUP)
        with contextlib.suppress(OSError):
            os.close(self.fd)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(self.pid, 0)


def process_state(pid: int) -> str:
    """The kernel's one-letter state of ``pid`` (T: stopped), or "" once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return ""


def group_members(pgid: int) -> list[int]:
    """Every live process of process group ``pgid``."""
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                if int(fields[2]) == pgid and fields[0] != "Z":
                    out.append(int(entry))
    return out
