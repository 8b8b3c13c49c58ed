"""``nines demo``: run broker, probe and stream job embedded, with a live terminal view."""

from __future__ import annotations

import argparse
import sys


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add the ``demo`` subcommand."""
    p = sub.add_parser("demo", help="Run broker, probe and stream job embedded, with a live terminal view.", description="Run broker, probe and stream job embedded, with a live terminal view.")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Not built yet."""
    print("nines demo: not implemented yet", file=sys.stderr)
    return 1
