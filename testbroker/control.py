"""Client side of a running ``nines broker``: its ready file and its loopback control socket.

Ready file (written atomically once every listener accepts connections), one value a line::

    <bootstrap servers>
    <control host:port>
    <pid>

Control protocol (loopback TCP, one command per line, one reply line each)::

    rtt BROKER MS | down BROKER | up BROKER | leader TOPIC PARTITION BROKER
    add-broker (mock: broker N+1 joins; replies "ok ID")
    create-topic NAME PARTITIONS | bootstrap | ping
    -> "ok[ DATA]" or "error: MESSAGE"
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
from dataclasses import dataclass
from pathlib import Path

from runtime.files import MAX_SMALL_BYTES, read_text_bounded


class ControlError(RuntimeError):
    """The broker refused a control command (its ``error: ...`` reply) or could not be reached."""


@dataclass(frozen=True)
class ReadyInfo:
    """What a client needs to use a running ``nines broker``, as its ready file states it."""

    bootstrap: str
    control: tuple[str, int]
    pid: int

    @classmethod
    def read(cls, path: str | Path) -> ReadyInfo:
        """Parse a ready file written by :func:`write_ready`."""
        lines = read_text_bounded(path, MAX_SMALL_BYTES).splitlines()
        if len(lines) < 3:
            raise ValueError(f"{path}: not a nines broker ready file")
        host, _, port = lines[1].rpartition(":")
        return cls(bootstrap=lines[0], control=(host, int(port)), pid=int(lines[2]))


def write_ready(path: Path, info: ReadyInfo) -> None:
    """Write the ready file atomically (temp file + rename) so readers never see half of it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(f"{info.bootstrap}\n{info.control[0]}:{info.control[1]}\n{info.pid}\n")
    os.replace(tmp, path)


def send(control: tuple[str, int], *words: str, timeout_s: float = 10.0) -> str:
    """Send one command; return the data after ``ok`` or raise ControlError with the reason."""
    line = " ".join(words)
    if "\n" in line or not line.strip():
        raise ControlError(f"bad command {line!r}")
    try:
        with socket.create_connection(control, timeout=timeout_s) as sock:
            sock.sendall(line.encode() + b"\n")
            reply = sock.makefile("rb").readline().decode().rstrip("\n")
    except OSError as exc:
        raise ControlError(f"control socket {control[0]}:{control[1]}: {exc}") from None
    if reply == "ok":
        return ""
    if reply.startswith("ok "):
        return reply[3:]
    raise ControlError(reply.removeprefix("error: ") if reply else "no reply (broker stopped?)")


def end_process(proc: subprocess.Popen[bytes], timeout_s: float) -> int:
    """SIGCONT (it may be stalled on purpose), SIGTERM, SIGKILL if it hangs; its exit status."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGCONT)
            proc.terminate()
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return proc.returncode
