"""The ``nines`` command: a thin layer that wires the stages together and holds no logic.

Every subcommand lives beside its stage and exposes ``register(subparsers)``; those modules
import heavy dependencies (Spark, Kafka) only inside their ``run`` functions, so ``--help`` is fast.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from typing import NoReturn

from core.config import ConfigError
from core.printable import printable
from core.redact import redact_text
from monitor import __version__
from runtime import quiet_stop
from runtime.redaction import install as install_redaction

#: Modules that register subcommands, in the order they appear in ``nines --help``.
COMMAND_MODULES = (
    "testbroker.cli",
    "probes.cli",
    "monitor.pipeline",  # nines stream: the stream stage with the exporter as its sink
    "monitor.demo",
    "monitor.compare",
    "monitor.report.cli",
    "monitor.alerts.cli",
    "dashboards.cli",
)


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a bad flag is one line naming it (as every other bad input), exit 2."""

    def error(self, message: str) -> NoReturn:
        line = printable(f"{self.prog}: error: {message} (see {self.prog} --help)")
        self.exit(2, redact_text(line) + "\n")


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser with every subcommand (each inherits the one-line errors)."""
    parser = OneLineParser(
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


def is_client_config_error(exc: BaseException) -> bool:
    """A Kafka client refusing its configuration (librdkafka's _INVALID_ARG), not a failure."""
    kafka = sys.modules.get("confluent_kafka")  # loaded if a Kafka client raised this
    if kafka is None or not isinstance(exc, kafka.KafkaException) or not exc.args:
        return False
    code = getattr(exc.args[0], "code", None)
    return callable(code) and code() == -186  # RD_KAFKA_RESP_ERR__INVALID_ARG


def client_error_text(exc: BaseException) -> str:
    """The client's own message (``KafkaError.str()``), without the exception's wrapping."""
    err = exc.args[0]
    return str(err.str()) if hasattr(err, "str") else str(err)


def print_error(command: str, text: str) -> None:
    """The one line a command prints for bad input (through the redactor, as every line is;
    control characters from the input escaped, so one line it stays)."""
    line = " ".join(f"nines {command}: error: {text}".split("\n"))
    print(printable(redact_text(line)), file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: parse, dispatch, and turn bad input into one line and exit status 2.

    Every log record, warning and uncaught traceback of the process is redacted from here on
    (``runtime.redaction.install``), whatever the stage configures afterwards.
    """
    import signal
    import threading

    install_redaction()
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    before, came = {}, False
    if threading.current_thread() is threading.main_thread():
        # until a long-running command installs its own (probe, stream, broker, demo), a signal
        # ends the start-up quietly: exit 0, no traceback, whatever it was doing
        came = quiet_stop.requested()  # during ``python -m monitor``'s imports, swallowed
        before = quiet_stop.install()
    try:
        if came:
            return 0
        return _dispatch(args)
    except BaseException:
        if not quiet_stop.requested():
            raise
        return 0
    finally:
        if before:
            quiet_stop.served()
        for sig, handler in before.items():  # a caller in-process gets its own back
            if handler is not None:
                signal.signal(sig, handler)


def run() -> None:
    """The ``nines`` command (and ``python -m monitor``): :func:`main`, then exit with its
    status. A stop signal that comes while the interpreter exits (a rollout's second SIGTERM, a
    second Ctrl+C) is ignored: the command has stopped cleanly, and its status stands (it
    became 143 once in 5 double SIGTERMs of a probe)."""
    import signal

    try:
        code = main()
    finally:  # argparse's --help and --version exit from inside main
        for sig in quiet_stop.SIGNALS:
            signal.signal(sig, signal.SIG_IGN)
    sys.exit(code)


def _dispatch(args: argparse.Namespace) -> int:
    """Run the command; bad input becomes one line and exit status 2."""
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        return 0
    except ConfigError as exc:
        print_error(args.command, str(exc))
        return 2
    except Exception as exc:
        if not is_client_config_error(exc):
            raise
        # librdkafka refused a setting: the user's input, so one line and exit 2, values hidden
        print_error(args.command, f"kafka: {client_error_text(exc)}")
        return 2


if __name__ == "__main__":
    sys.exit(main())
