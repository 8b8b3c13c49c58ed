"""The redactor installed on this process: every log record, warning and uncaught traceback.

``core.redact`` holds what is hidden (pure text functions); this module hooks it into the
process: the log record factory, the root logger's handlers, ``warnings.formatwarning``,
``sys.excepthook`` and ``threading.excepthook`` (``install``, once at start, by the CLI). Each
record's text also has its control characters escaped (``core.printable``).
"""

from __future__ import annotations

import logging
import sys
import threading
import traceback
import warnings
from collections.abc import Callable, Mapping
from typing import Any

from core.printable import printable, printable_lines
from core.redact import redact_text


def _printable_args(args: Any) -> Any:
    """A log record's arguments with their strings escaped (``core.printable``)."""
    if isinstance(args, Mapping):
        return {k: printable(v) if isinstance(v, str) else v for k, v in args.items()}
    return tuple(printable(a) if isinstance(a, str) else a for a in args)


class RedactingRecord(logging.LogRecord):
    """A log record whose message, exception and stack text are redacted (whatever the handler)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.exc_info and self.exc_info[0] is not None:
            # formatters use a set exc_text as is: the traceback is redacted once, here
            text = "".join(traceback.format_exception(*self.exc_info))
            self.exc_text = printable_lines(redact_text(text))
            self.exc_text = self.exc_text.rstrip("\n")
        if self.stack_info:
            self.stack_info = redact_text(self.stack_info)

    def getMessage(self) -> str:
        """The formatted message, redacted, its control characters escaped: all of them in the
        arguments (a label from an echo or an archive must neither drive the terminal nor forge
        a log line), all but line ends and tabs in the message itself."""
        msg = str(self.msg)
        if self.args:
            msg = msg % _printable_args(self.args)
        return printable_lines(redact_text(msg))


class RedactingFilter(logging.Filter):
    """For handlers of records made elsewhere: redacts the message in place."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Replace the record's message with its redacted text."""
        if not isinstance(record, RedactingRecord):
            record.msg, record.args = printable_lines(redact_text(record.getMessage())), None
        return True


_once = threading.Lock()
_hooks: list[bool] = []


def _redacting_formatwarning(original: Callable[..., str]) -> Callable[..., str]:
    def formatwarning(*args: Any, **kwargs: Any) -> str:
        return redact_text(original(*args, **kwargs))

    return formatwarning


def _excepthook(kind: type[BaseException], exc: BaseException, tb: Any) -> None:
    sys.stderr.write(redact_text("".join(traceback.format_exception(kind, exc, tb))))


def _thread_excepthook(args: threading.ExceptHookArgs) -> None:
    if args.exc_type is SystemExit:
        return
    name = args.thread.name if args.thread else "?"
    text = "".join(traceback.format_exception(args.exc_type, args.exc_value, args.exc_traceback))
    sys.stderr.write(redact_text(f"Exception in thread {name}:\n{text}"))


def install() -> None:
    """Route every log record, warning and uncaught traceback of this process through the
    redactor: records are made redacted whatever handler a stage configures later, and the root
    logger's handlers get a :class:`RedactingFilter` too. Idempotent."""
    with _once:
        if not _hooks:
            _hooks.append(True)
            logging.setLogRecordFactory(RedactingRecord)
            warnings.formatwarning = _redacting_formatwarning(warnings.formatwarning)
            sys.excepthook = _excepthook
            threading.excepthook = _thread_excepthook
    for handler in logging.getLogger().handlers:
        if not any(isinstance(f, RedactingFilter) for f in handler.filters):
            handler.addFilter(RedactingFilter())
