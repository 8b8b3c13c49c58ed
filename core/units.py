"""Parsing of durations, sizes and rates as users write them in flags and YAML."""

from __future__ import annotations

import re

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


def parse_duration_s(text: str | float | int) -> float:
    """Seconds from '250ms', '10s', '1m30s', '2h' (a bare number is seconds)."""
    if isinstance(text, bool):
        raise ValueError(f"not a duration: {text!r}")
    if isinstance(text, int | float):
        value = float(text)
    else:
        s = text.strip().lower().replace(" ", "")
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
                raise ValueError(f"not a duration: {text!r} (use e.g. 500ms, 10s, 1m, 2h)")
    if value < 0:
        raise ValueError(f"duration must not be negative: {text!r}")
    return value


def format_duration(seconds: float) -> str:
    """The short form used in labels: 10s, 1m, 1h, 250ms."""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if seconds >= size and float(seconds / size).is_integer():
            return f"{int(seconds // size)}{unit}"
    return f"{round(seconds * 1000, 3):g}ms"


def parse_size_bytes(text: str | int) -> int:
    """Bytes from '512', '1KiB', '4kb', '1MiB'."""
    if isinstance(text, bool):
        raise ValueError(f"not a size: {text!r}")
    if isinstance(text, int):
        value = text
    else:
        m = _SIZE.fullmatch(text.strip().lower())
        if not m or m.group(2) not in _SIZE_UNITS:
            raise ValueError(f"not a size: {text!r} (use e.g. 512, 1KiB, 1MiB)")
        value = int(float(m.group(1)) * _SIZE_UNITS[m.group(2)])
    if value < 0:
        raise ValueError(f"size must not be negative: {text!r}")
    return value


def parse_rate(text: str | float | int) -> float:
    """Messages per second from '100', '100/s', '6000/m'."""
    if isinstance(text, bool):
        raise ValueError(f"not a rate: {text!r}")
    if isinstance(text, int | float):
        return float(text)
    s = text.strip().lower().replace(" ", "")
    per = 1.0
    if "/" in s:
        s, unit = s.split("/", 1)
        per = {"s": 1.0, "m": 60.0, "h": 3600.0}.get(unit, 0.0)
        if not per:
            raise ValueError(f"not a rate: {text!r} (use e.g. 100 or 100/s)")
    try:
        return float(s) / per
    except ValueError:
        raise ValueError(f"not a rate: {text!r} (use e.g. 100 or 100/s)") from None
