"""What the stream's Spark JVM writes, and how a failed query is told: one line an event.

Spark's own log4j profile writes each error with its Java stack trace to stderr (a failed batch:
about 150 lines, 41 of them frames), so an operator's terminal or ``kubectl logs`` shows frames
instead of the cause. The driver JVM this process starts gets this log4j2 configuration instead:
stderr has one line per error, its message cut to ``CONSOLE_MESSAGE_CHARS`` with line ends
escaped, and no trace; ``spark_log`` (a file, rolled at ``SPARK_LOG_BYTES``, ``SPARK_LOG_FILES``
kept) has every event from WARN up, with its trace. Under spark-submit (the Spark Operator)
the JVM is started before this code runs, and spark-submit's own log4j configuration applies.

When the query stops on an error, :func:`failure_line` names its cause: the exception our
sink raised, else a Python worker's exception line, else the Java exception at the root of
Spark's chain.
"""

from __future__ import annotations

import logging
import os
import tempfile
from typing import Any, Final

from core.printable import printable
from runtime.disk import NO_SPACE

#: The longest message a Spark event shows on stderr (a Python traceback inside a message, or a
#: query plan, is cut there; the whole of it is in ``spark_log``).
CONSOLE_MESSAGE_CHARS: Final = 400
#: ``spark_log`` rolls over at this size, and keeps this many files: bounded on disk.
SPARK_LOG_BYTES: Final = 16 * 1024 * 1024
SPARK_LOG_FILES: Final = 2
#: The longest cause :func:`failure_line` gives.
FAILURE_CHARS: Final = 500
#: What opens a Python traceback, inside the text of a Spark exception too.
_TRACEBACK = "Traceback (most recent call last):"

#: Loggers that say nothing an operator can act on, at WARN (kept out of ``spark_log`` too):
#: the Hadoop native library, absent by design.
_QUIET = {"hadoop_native": "org.apache.hadoop.util.NativeCodeLoader"}


def log4j_properties(spark_log: str) -> str:
    """The driver's log4j2 configuration: stderr one line an error; ``spark_log`` all from WARN."""
    lines = [
        # log4j's own errors (a ``spark_log`` on a full disk: a trace an event) go nowhere; the
        # query that stops on that disk says so in one line (``StreamJob.failure``)
        "status = off",
        "rootLogger.level = warn",
        "rootLogger.appenderRef.console.ref = console",
        "appender.console.type = Console",
        "appender.console.name = console",
        "appender.console.target = SYSTEM_ERR",
        "appender.console.layout.type = PatternLayout",
        # %enc{..}{CRLF} escapes line ends: a multi-line message stays one line; no %ex: no trace
        "appender.console.layout.pattern = %d{yy/MM/dd HH:mm:ss} %p %c{1}: "
        f"%maxLen{{%enc{{%m}}{{CRLF}}}}{{{CONSOLE_MESSAGE_CHARS}}}%n",
        "appender.console.layout.alwaysWriteExceptions = false",
        # Spark's warnings are routine (a batch "falling behind" its trigger): stderr has errors
        "appender.console.filter.threshold.type = ThresholdFilter",
        "appender.console.filter.threshold.level = error",
    ]
    for name, logger in _QUIET.items():
        lines += [f"logger.{name}.name = {logger}", f"logger.{name}.level = error"]
    if spark_log:
        lines.insert(
            lines.index("rootLogger.level = warn") + 1, "rootLogger.appenderRef.file.ref = file"
        )
        lines += [
            "appender.file.type = RollingFile",
            "appender.file.name = file",
            f"appender.file.fileName = {_escaped(spark_log)}",
            f"appender.file.filePattern = {_escaped(spark_log)}.%i",
            "appender.file.layout.type = PatternLayout",
            "appender.file.layout.pattern = %d{ISO8601} %p %c: %m%n%ex",
            "appender.file.policies.type = Policies",
            "appender.file.policies.size.type = SizeBasedTriggeringPolicy",
            f"appender.file.policies.size.size = {SPARK_LOG_BYTES}",
            "appender.file.strategy.type = DefaultRolloverStrategy",
            f"appender.file.strategy.max = {SPARK_LOG_FILES - 1}",
        ]
    return "\n".join(lines) + "\n"


def _escaped(path: str) -> str:
    """A path as a .properties value that log4j reads back as written (no lookups)."""
    return path.replace("\\", "\\\\").replace("$", "$$")


def write_log4j_properties(spark_log: str) -> str:
    """The configuration in a file of its own (the JVM reads it once, at start); its path."""
    fd, path = tempfile.mkstemp(prefix="nines-log4j2-", suffix=".properties")
    with os.fdopen(fd, "w") as f:
        f.write(log4j_properties(spark_log))
    return path


def java_option(path: str) -> str:
    """The driver JVM flag that makes it read ``path``."""
    return f"-Dlog4j2.configurationFile=file:{path}"


class TraceToLine(logging.Filter):
    """py4j reports a failed foreachBatch call with its traceback; the cause is told once, by
    :func:`failure_line`, so the record keeps one line: its message and the exception's."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Fold the record's exception into its message."""
        if record.exc_info and record.exc_info[1] is not None:
            record.msg = f"{record.getMessage().rstrip('.')}: {one_line(record.exc_info[1])}"
            record.args = None
            record.exc_info = record.exc_text = None
        return True


def one_line(exc: BaseException) -> str:
    """``Type: message``, printable and cut to ``FAILURE_CHARS``: the message's first line, or
    when it carries a Python traceback (a Spark task's Python worker failed), that traceback's
    exception line, which names the error."""
    text = str(exc)
    cause = _traceback_cause(text)
    return _cut(cause) if cause else _named(type(exc).__name__, text)


def _named(name: str, message: str) -> str:
    """``name: the message's first line`` (``name`` alone without one), printable and cut."""
    lines = message.strip().splitlines()
    return _cut(f"{name}: {lines[0]}" if lines else name)


def _traceback_cause(text: str) -> str | None:
    """The exception line of the last Python traceback in ``text`` (``Error: why``), if any:
    its frames and source lines are indented, the exception line is the first that is not (a
    query's own text may follow it)."""
    at = text.rfind(_TRACEBACK)
    if at < 0:
        return None
    for line in text[at + len(_TRACEBACK) :].splitlines():
        if line.strip() and not line[0].isspace():
            return line.strip()
    return None


def _cut(text: str) -> str:
    text = printable(text)
    return text if len(text) <= FAILURE_CHARS else text[: FAILURE_CHARS - 1] + "…"


def java_root_cause(exc: Any) -> str | None:
    """The Java cause of a PySpark exception (or of py4j's ``Py4JJavaError``), as ``Class:
    message``: a full disk wherever the chain names one (Hadoop wraps it in an ``FSError``,
    Spark in a task failure, none with a path), else the innermost cause. None if it has no
    Java side, or the JVM is gone."""
    # query.exception() keeps no Java origin of its own, only its converted cause's
    cause = getattr(exc, "_cause", None)
    throwable = (
        getattr(exc, "_origin", None)
        or getattr(cause, "_origin", None)
        or getattr(exc, "java_exception", None)  # a Py4JJavaError our sink's Spark call raised
    )
    if throwable is None:
        return None
    try:
        chain = [throwable]
        while chain[-1].getCause() is not None and len(chain) < 64:  # a cycle is possible
            chain.append(chain[-1].getCause())
        named = [(str(t.getClass().getSimpleName()), str(t.getMessage() or "")) for t in chain]
    except Exception:  # the JVM went first
        return None
    full = [n for n in named if NO_SPACE in n[1]]
    return _named(*(full[-1] if full else named[-1]))


def failure_line(exc: Any, sink_error: BaseException | None) -> str:
    """Why the query stopped, in one line: our sink's own exception when it raised one (py4j
    wraps it in Java wrapping Python text; a Spark call of the sink that failed in Java is
    named by its Java cause), else the Java root cause, else the exception's first line."""
    if sink_error is not None:
        return java_root_cause(sink_error) or one_line(sink_error)
    if exc is None:
        return "it stopped without an exception (stopped from elsewhere?)"
    return java_root_cause(exc) or one_line(exc)
