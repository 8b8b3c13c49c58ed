"""A background process's priority that holds in its own session, too.

Linux's autogroup scheduling (``/proc/sys/kernel/sched_autogroup_enabled``, on by default in
most distributions' kernels, and on this machine's) gives every session a group of its own and
shares the CPU between groups first: a process's nice value only ranks it inside its group. A
build started with ``start_new_session=True`` at nice 19 was therefore weighted like the whole
test run: on a fresh 2-core machine the two Go builds took two shares of three while they ran
(30 min), and the suite beside them ran ~1.3x slower than on a cached machine (compare e2e
262 s against 154 s). The group's own nice (``/proc/self/autogroup``) ranks the group; setting
it to the process's nice makes "nice 19" mean what it says. (Keycloak, nice 10 in a session
of its own, keeps its group's full weight: it answers the OIDC tests' token requests, and a
refresh has 4 s of a 20 s token's lifetime to spare.) Where the process sits in a cgroup with
a CPU controller of its own (a CI container), the kernel schedules by that cgroup, not by
autogroup: ``/proc/self/autogroup`` reads empty, writing it changes nothing, and nice alone
ranks the build against the tests, as it says.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from pathlib import Path

#: Where the kernel keeps the calling process's autogroup and its nice value.
AUTOGROUP = Path("/proc/self/autogroup")


def lower_priority(nice: int) -> Callable[[], None]:
    """A ``preexec_fn`` for ``subprocess.Popen(..., start_new_session=True)``: the child at
    ``nice``, and its session's autogroup too, where the kernel has autogroups (elsewhere the
    process's nice is all there is). Python runs ``preexec_fn`` after ``setsid``, so the group
    is the child's own."""

    def preexec() -> None:
        os.nice(nice)
        with contextlib.suppress(OSError):
            AUTOGROUP.write_text(f"{os.getpriority(os.PRIO_PROCESS, 0)}\n")

    return preexec


__all__ = ["AUTOGROUP", "lower_priority"]
