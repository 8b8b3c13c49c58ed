"""``nines report``: plot latency-by-percentile from the histogram archive."""

from __future__ import annotations

import argparse
import sys


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add the ``report`` subcommand."""
    p = sub.add_parser("report", help="Plot latency-by-percentile from the histogram archive.", description="Plot latency-by-percentile from the histogram archive.")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Not built yet."""
    print("nines report: not implemented yet", file=sys.stderr)
    return 1
