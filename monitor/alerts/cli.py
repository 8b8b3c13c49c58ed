"""``nines alerts``: render Prometheus alerting rules from an SLA file."""

from __future__ import annotations

import argparse
import sys


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add the ``alerts`` subcommand."""
    p = sub.add_parser("alerts", help="Render Prometheus alerting rules from an SLA file.", description="Render Prometheus alerting rules from an SLA file.")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Not built yet."""
    print("nines alerts: not implemented yet", file=sys.stderr)
    return 1
