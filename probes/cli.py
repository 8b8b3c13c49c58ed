"""``nines probe``: run an open-loop, coordinated-omission-correct probe that publishes echo records."""

from __future__ import annotations

import argparse
import sys


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add the ``probe`` subcommand."""
    p = sub.add_parser("probe", help="Run an open-loop, coordinated-omission-correct probe that publishes echo records.", description="Run an open-loop, coordinated-omission-correct probe that publishes echo records.")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Not built yet."""
    print("nines probe: not implemented yet", file=sys.stderr)
    return 1
