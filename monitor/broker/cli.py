"""``nines broker``: run the embedded Kafka-protocol test cluster (librdkafka mock) with fault injection."""

from __future__ import annotations

import argparse
import sys


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add the ``broker`` subcommand."""
    p = sub.add_parser("broker", help="Run the embedded Kafka-protocol test cluster (librdkafka mock) with fault injection.", description="Run the embedded Kafka-protocol test cluster (librdkafka mock) with fault injection.")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Not built yet."""
    print("nines broker: not implemented yet", file=sys.stderr)
    return 1
