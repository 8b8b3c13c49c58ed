"""The ``nines`` command: a thin layer that wires the stages together and holds no logic.

Every subcommand lives beside its stage and exposes ``register(subparsers)``; those modules
import heavy dependencies (Spark, Kafka) only inside their ``run`` functions, so ``--help`` is fast.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from core.config import ConfigError
from monitor import __version__

#: Modules that register subcommands, in the order they appear in ``nines --help``.
COMMAND_MODULES = (
    "testbroker.cli",
    "probes.cli",
    "monitor.pipeline",  # nines stream: the stream stage with the exporter as its sink
    "monitor.demo",
    "monitor.report",
    "monitor.alerts.cli",
    "dashboards.cli",
)


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser with every subcommand."""
    parser = argparse.ArgumentParser(
        prog="nines",
        description="nines: a live latency monitor for message brokers. "
        "Probes measure from the intended send time; Spark keeps mergeable HDR histograms; "
        "Prometheus gets the max and the high nines.",
        epilog="Start with: nines demo",
    )
    parser.add_argument("--version", action="version", version=f"nines {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: parse, dispatch, and turn bad input into one line and exit status 2."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except ConfigError as exc:
        print(f"nines {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
