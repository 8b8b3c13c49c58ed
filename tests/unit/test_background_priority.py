"""``testkit.niceness``: a background process in a session of its own keeps its low priority
against the test run, where the kernel groups sessions (autogroup)."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from testkit.niceness import AUTOGROUP, lower_priority


def group_and_nice(pid: int) -> tuple[str, int]:
    """The process's autogroup line (``/autogroup-N nice K``), and its own nice. The line is ""
    without autogroups, and also where the kernel has them but the process sits in a cgroup
    with a CPU controller of its own (a CI container): the kernel prints nothing then, and nice
    ranks the processes of that cgroup as it says."""
    line = ""
    if AUTOGROUP.exists():
        line = Path(f"/proc/{pid}/autogroup").read_text().strip()
    return line, os.getpriority(os.PRIO_PROCESS, pid)


def test_a_process_in_its_own_session_is_low_in_its_group_and_the_group_is_low_too() -> None:
    before = os.getpriority(os.PRIO_PROCESS, 0)
    proc = subprocess.Popen(["sleep", "30"], start_new_session=True, preexec_fn=lower_priority(19))
    try:
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:  # the child has exec'd sleep: its own comm
            if Path(f"/proc/{proc.pid}/comm").read_text().strip() == "sleep":
                break
            time.sleep(0.01)
        group, nice = group_and_nice(proc.pid)
        assert nice == 19
        mine, _ = group_and_nice(os.getpid())
        if mine:  # the kernel schedules the caller by autogroup: the child has one of its own
            assert group.split()[0] != mine.split()[0], (group, mine)
            assert group.endswith(" nice 19"), group
    finally:
        proc.kill()
        proc.wait()
    assert os.getpriority(os.PRIO_PROCESS, 0) == before  # the caller is untouched
