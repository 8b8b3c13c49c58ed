"""What reaches a human's terminal or page is text, never control: one escaper for every printer.

Labels come from outside (a cluster or probe id in an echo record, an archive's rows, an SLA's
names, a path): a raw ESC can recolour or retitle the operator's terminal, clear it, or hide a
line; a raw newline splits the one-line error in two; a bidi override reorders what is read;
matplotlib warns about every control character it cannot draw. :func:`printable` writes each
such character as its Python escape (``\\x1b``, ``\\u202e``), so it is shown, not obeyed.
Every human-facing printer uses it: the CLI's error line and warnings, the report's plot, page
and tables, the demo's screen. Pure: imports only the standard library.
"""

from __future__ import annotations

import re

#: C0 and C1 controls and DEL (category Cc), line and paragraph separators, and the format
#: characters that reorder or hide text (bidi embeddings, overrides and isolates; zero-width).
_UNSAFE = re.compile(
    "[\x00-\x1f\x7f-\x9f\u2028\u2029\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff]"
)


def _escape(match: re.Match[str]) -> str:
    c = match.group(0)
    return f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}"


def printable(text: str) -> str:
    """``text`` with every control, separator and reordering character escaped (``\\x1b``)."""
    return _UNSAFE.sub(_escape, text)


def printable_lines(text: str) -> str:
    """:func:`printable`, but keeping line ends and tabs: for a log record or a traceback, whose
    lines are meant (a CR, which rewrites the line on a terminal, is escaped)."""
    return _UNSAFE.sub(lambda m: m.group(0) if m.group(0) in "\n\t" else _escape(m), text)


__all__ = ["printable", "printable_lines"]
