"""A failed query is told in one line: the cause found in Python tracebacks and Java chains."""

from __future__ import annotations

import traceback

import pytest
from hypothesis import given
from hypothesis import strategies as st

from core.printable import printable
from streaming.jvm_log import (
    FAILURE_CHARS,
    _escaped,
    failure_line,
    log4j_properties,
    one_line,
)


def traceback_text(exc: BaseException) -> str:
    return "".join(traceback.format_exception(exc))


def raised(exc: BaseException) -> BaseException:
    try:
        raise exc
    except BaseException as caught:
        return caught


def chained() -> BaseException:
    try:
        try:
            raise KeyError("inner")
        except KeyError as inner:
            raise NotADirectoryError(20, "Not a directory", "/data/archive/hour=08") from inner
    except NotADirectoryError as outer:
        return outer


class Wrapped(Exception):
    """What py4j and Spark make of a Python worker's error: text around a Python traceback."""


def test_a_python_traceback_inside_spark_text_gives_its_exception_line() -> None:
    inner = chained()
    text = (
        "An exception was thrown from the Python worker. Please see the stack trace below.\n"
        + traceback_text(inner)
        + "\n=== Streaming Query ===\nIdentifier: nines-1 [id = x]\nCurrent State: ACTIVE\n"
    )
    line = one_line(Wrapped(text))
    assert line == "NotADirectoryError: [Errno 20] Not a directory: '/data/archive/hour=08'"


@given(st.text(min_size=1, max_size=3000))
def test_one_line_is_always_one_printable_bounded_line(message: str) -> None:
    line = one_line(raised(ValueError(message)))
    assert "\n" not in line and "\r" not in line and "\x1b" not in line
    assert len(line) <= FAILURE_CHARS
    assert printable(line) == line  # control characters escaped (core.printable)


@given(st.text(min_size=1, max_size=200))
def test_the_sinks_own_error_wins_over_the_query_text(message: str) -> None:
    ours = raised(OSError(28, "No space left on device", "/data/archive"))
    assert failure_line(Wrapped(message), ours) == one_line(ours)
    assert "No space left on device" in failure_line(Wrapped(message), ours)


def test_no_exception_is_said_so() -> None:
    assert "without an exception" in failure_line(None, None)


@pytest.mark.parametrize("path", ["/var/log/spark.log", "/l/${env:HOME}/x.log", "C:\\l\\s.log"])
def test_the_log_file_path_reaches_log4j_as_written(path: str) -> None:
    text = log4j_properties(path)
    assert f"appender.file.fileName = {_escaped(path)}" in text
    assert "${" not in _escaped(path).replace("$${", "")  # no lookup left
    assert "appender.file" not in log4j_properties("")
    # stderr: errors only, no trace; the file: traces
    assert "%ex" not in text.split("appender.console.layout.pattern = ")[1].splitlines()[0]
    assert "level = error" in text
