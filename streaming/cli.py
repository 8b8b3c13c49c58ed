"""``nines stream``: run the Spark job: echoes -> windowed HDR histograms -> Prometheus."""

from __future__ import annotations

import argparse
import sys


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add the ``stream`` subcommand."""
    p = sub.add_parser("stream", help="Run the Spark job: echoes -> windowed HDR histograms -> Prometheus.", description="Run the Spark job: echoes -> windowed HDR histograms -> Prometheus.")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Not built yet."""
    print("nines stream: not implemented yet", file=sys.stderr)
    return 1
