"""``nines dashboards``: export or push the Grafana dashboards."""

from __future__ import annotations

import argparse
import sys


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add the ``dashboards`` subcommand."""
    p = sub.add_parser("dashboards", help="Export or push the Grafana dashboards.", description="Export or push the Grafana dashboards.")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Not built yet."""
    print("nines dashboards: not implemented yet", file=sys.stderr)
    return 1
