"""CPU time and resident memory of a process, from /proc (Linux), for the probe benchmarks."""

from __future__ import annotations

import os
import subprocess
import threading
from collections.abc import Mapping
from pathlib import Path

CLK_TCK = os.sysconf("SC_CLK_TCK")


def _stat_cpu_s(stat: str) -> float:
    """utime + stime in seconds from a /proc ``stat`` line (fields 14 and 15 of stat(5))."""
    fields = stat.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def cpu_s(pid: int) -> float:
    """utime + stime of every thread of ``pid`` so far, in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        return _stat_cpu_s(f.read())


def descendants(roots: list[int]) -> list[int]:
    """``roots`` and every process below them alive now (children of children too)."""
    children: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(d.name))
    out, todo = [], list(roots)
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo += children.get(pid, [])
    return out


def cpu_s_by_thread(pid: int) -> dict[str, float]:
    """utime + stime so far of the threads of ``pid``, summed by thread name (``comm``).

    Threads that already ended are not counted; the probe's live for its whole run.
    """
    out: dict[str, float] = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                stat = f.read()
        except OSError:  # the thread ended meanwhile
            continue
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        out[name] = out.get(name, 0.0) + _stat_cpu_s(stat)
    return out


def rss_mib(pid: int) -> float:
    """Resident set size of ``pid`` in MiB."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for {pid}")


def start_logged(
    cmd: list[str], cwd: Path, env: Mapping[str, str], ready: str
) -> tuple[subprocess.Popen[str], list[str], threading.Event, threading.Thread]:
    """Start ``cmd`` with its stderr gathered line by line (stdout discarded); the event is set
    at the first line containing ``ready`` (a probe's " probing " line). Join the thread after
    the process ends to have its last lines."""
    proc = subprocess.Popen(
        cmd, cwd=cwd, env=dict(env), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    log: list[str] = []
    started = threading.Event()

    def read_stderr() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            log.append(line.rstrip())
            if ready in line:
                started.set()

    reader = threading.Thread(target=read_stderr, daemon=True)
    reader.start()
    return proc, log, started, reader
