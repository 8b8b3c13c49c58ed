"""Parsing of durations, sizes and rates as users write them in flags and YAML."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping

#: The longest duration anything takes: ten years (a longer wait overflows the clocks it reaches).
MAX_DURATION_S = 10 * 365 * 86400.0
#: Beyond this no number is a setting (2**63: a signed 64-bit integer, as Kafka and the JVM hold).
MAX_NUMBER = float(2**63)
DURATION_EXAMPLE = "500ms, 10s, 1m, 2h"
SIZE_EXAMPLE = "512, 1KiB, 1MiB"
RATE_EXAMPLE = "100 or 100/s"
#: Characters of a bad value a message quotes; a longer one is cut in the middle.
MAX_SHOWN = 60

_DURATION_UNITS_S = {
    "us": 1e-6,
    "µs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
    "d": 86400.0,
}
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(us|µs|ms|s|m|h|d)")
_SIZE_UNITS = {
    "": 1,
    "b": 1,
    "k": 1000,
    "kb": 1000,
    "kib": 1024,
    "m": 1000**2,
    "mb": 1000**2,
    "mib": 1024**2,
    "g": 1000**3,
    "gb": 1000**3,
    "gib": 1024**3,
}
_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*([a-z]*)")


def describe(value: object) -> str:
    """How a message shows a value of the wrong kind: its repr, or what it is (never its items,
    which may hold a secret)."""
    if value is None:
        return "null"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list | tuple | set):
        return "a list"
    if isinstance(value, bool):
        return "true" if value else "false"
    shown = repr(value)
    return shown if len(shown) <= MAX_SHOWN else f"{shown[: MAX_SHOWN - 4]}…{shown[-3:]}"


def _scalar(value: object, what: str, example: str) -> str | float:
    """``value`` if a string or a finite number; otherwise ValueError naming what was expected.

    YAML hands over lists, mappings, null, booleans, ``.inf`` and ``.nan`` as readily as
    strings; each is refused here, once, for every duration, size and rate."""
    if isinstance(value, str):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(
                f"not a {what}: {describe(value)} (must be finite; use e.g. {example})"
            )
        if abs(value) > MAX_NUMBER:
            raise ValueError(f"not a {what}: out of range (use e.g. {example})")
        return float(value)
    raise ValueError(f"not a {what}: {describe(value)} (use e.g. {example})")


def parse_duration_s(text: object) -> float:
    """Seconds from '250ms', '10s', '1m30s', '2h' (a bare number is seconds), at most
    :data:`MAX_DURATION_S`."""
    value = _scalar(text, "duration", DURATION_EXAMPLE)
    if isinstance(value, str):
        s = value.strip().lower().replace(" ", "")
        if re.fullmatch(r"\d+(?:\.\d+)?", s):
            value = float(s)
        else:
            pos, value = 0, 0.0
            for m in _DURATION_PART.finditer(s):
                if m.start() != pos:
                    break
                value += float(m.group(1)) * _DURATION_UNITS_S[m.group(2)]
                pos = m.end()
            if pos != len(s) or not s:
                raise ValueError(f"not a duration: {describe(text)} (use e.g. {DURATION_EXAMPLE})")
    if value < 0:
        raise ValueError(f"duration must not be negative: {describe(text)}")
    if not value <= MAX_DURATION_S:  # also catches a string of digits too long to be finite
        raise ValueError(
            f"must be at most {format_duration(MAX_DURATION_S)} (got {describe(text)})"
        )
    return value


def format_duration(seconds: float) -> str:
    """The short form used in labels: 10s, 1m, 1h, 250ms."""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if seconds >= size and float(seconds / size).is_integer():
            return f"{int(seconds // size)}{unit}"
    return f"{round(seconds * 1000, 3):g}ms"


def parse_size_bytes(text: object) -> int:
    """Bytes from '512', '1KiB', '4kb', '1MiB' (a whole number of them)."""
    value = _scalar(text, "size", SIZE_EXAMPLE)
    if isinstance(value, str):
        m = _SIZE.fullmatch(value.strip().lower())
        if not m or m.group(2) not in _SIZE_UNITS:
            raise ValueError(f"not a size: {describe(text)} (use e.g. {SIZE_EXAMPLE})")
        value = float(m.group(1)) * _SIZE_UNITS[m.group(2)]
        if not value <= MAX_NUMBER:
            raise ValueError(
                f"not a size: {describe(text)} is out of range (use e.g. {SIZE_EXAMPLE})"
            )
    elif not value.is_integer():
        raise ValueError(f"not a size: {describe(text)} is not a whole number of bytes")
    if value < 0:
        raise ValueError(f"size must not be negative: {describe(text)}")
    return int(value)


def parse_rate(text: object) -> float:
    """Messages per second from '100', '100/s', '6000/m' (finite; the caller sets the range)."""
    value = _scalar(text, "rate", RATE_EXAMPLE)
    if isinstance(value, float):
        return value
    s = value.strip().lower().replace(" ", "")
    per = 1.0
    if "/" in s:
        s, unit = s.split("/", 1)
        per = {"s": 1.0, "m": 60.0, "h": 3600.0}.get(unit, 0.0)
        if not per:
            raise ValueError(f"not a rate: {describe(text)} (use e.g. {RATE_EXAMPLE})")
    try:
        rate = float(s) / per
    except ValueError:
        raise ValueError(f"not a rate: {describe(text)} (use e.g. {RATE_EXAMPLE})") from None
    if not math.isfinite(rate) or abs(rate) > MAX_NUMBER:
        raise ValueError(f"not a rate: {describe(text)} (must be finite; use e.g. {RATE_EXAMPLE})")
    return rate
