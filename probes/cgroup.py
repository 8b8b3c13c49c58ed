"""The CPU throttling of the probe's own cgroup: a probe throttled by its CPU limit lags its
schedule, and that lag is the probe's, not the broker's.

Read from the cgroup v2 ``cpu.stat`` (or v1's ``cpu.stat`` of the ``cpu`` controller) of the
cgroup the process is in, per scrape. Where there is none (no cgroup file, no CPU controller),
nothing is returned and nothing is exported: a throttling figure is never invented.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

#: Where the cgroup filesystems are mounted, and the process's own membership.
CGROUP_ROOT = Path("/sys/fs/cgroup")
SELF_CGROUP = Path("/proc/self/cgroup")


@dataclass(frozen=True)
class Throttling:
    """CFS bandwidth counters of one cgroup, cumulative since it was created."""

    periods: int
    throttled_periods: int
    throttled_s: float


def stat_paths(membership: str, root: Path = CGROUP_ROOT) -> list[Path]:
    """Candidate ``cpu.stat`` files for a ``/proc/self/cgroup`` text, most specific first.

    In a container the cgroup namespace makes the process's own cgroup the mount's root, so the
    root's ``cpu.stat`` comes last, as a fallback.
    """
    out: list[Path] = []
    for line in membership.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        rel = path.strip().lstrip("/")
        if controllers == "":  # v2 unified hierarchy
            out.append(root / rel / "cpu.stat")
        elif "cpu" in controllers.split(","):  # v1: the cpu (or cpu,cpuacct) controller
            for mount in (root / controllers, root / "cpu", root / "cpu,cpuacct"):
                out.append(mount / rel / "cpu.stat")
    out.append(root / "cpu.stat")
    return list(dict.fromkeys(out))


def parse_cpu_stat(text: str) -> Throttling | None:
    """v2 ``nr_periods``/``nr_throttled``/``throttled_usec`` or v1's ``throttled_time`` (ns);
    None without the bandwidth fields (no CPU limit ever set: v2 then shows only usage)."""
    fields: dict[str, int] = {}
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if value.strip().isdigit():
            fields[key] = int(value)
    if "nr_periods" not in fields or "nr_throttled" not in fields:
        return None
    if "throttled_usec" in fields:
        throttled_s = fields["throttled_usec"] / 1e6
    elif "throttled_time" in fields:
        throttled_s = fields["throttled_time"] / 1e9
    else:
        return None
    return Throttling(fields["nr_periods"], fields["nr_throttled"], throttled_s)


def read_throttling(root: Path = CGROUP_ROOT, membership: Path = SELF_CGROUP) -> Throttling | None:
    """This process's cgroup's throttling counters, or None where the host has none."""
    try:
        text = membership.read_text()
    except OSError:
        text = ""
    for path in stat_paths(text, root):
        try:
            found = parse_cpu_stat(path.read_text())
        except OSError:
            continue
        if found is not None:
            return found
    return None
