"""The process's open-file limit, raised at start as Go programs do."""

from __future__ import annotations

import resource


def raise_open_files_limit() -> int:
    """Raise the soft RLIMIT_NOFILE to the hard limit; returns the soft limit now in force.

    Every /metrics connection (``runtime.webserver`` holds up to ``MAX_CONNECTIONS``), Kafka
    socket and archive file is a descriptor, and the soft default (1,024 on most systems) only
    guards old ``select()`` code, which nines does not use: at 1,024 a flood of connections
    would run the process out of descriptors, not out of the server's bound. Go's runtime has
    raised it to the hard limit at start since Go 1.19, so node_exporter does too. The hard
    limit is the administrator's and stays.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        except (OSError, ValueError):  # e.g. a hard limit above the kernel's nr_open
            return soft
    return hard
