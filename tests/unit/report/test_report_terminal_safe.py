"""What reaches the operator's terminal is text: labels holding control characters are escaped.

``core.printable.printable`` over generated text (every control, separator and reordering
character escaped, everything else kept); then ``nines report`` and ``nines slo`` as their own
processes on an archive whose cluster and topic labels hold ESC sequences, BEL, CR, newlines, C1
controls and a bidi override: nothing raw on stdout or stderr, no matplotlib glyph warning, and
the HTML page holds neither a raw control character nor raw markup from a label.
"""

from __future__ import annotations

import io
import logging
import os
import subprocess
import sys
import time
import unicodedata
from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from core.hdr import HdrLayout, SparseHistogram
from core.printable import printable
from core.windows import SeriesKey, WindowHistogram
from runtime.redaction import install
from streaming.archive import write_windows

ROOT = Path(__file__).resolve().parents[3]
#: Characters that must never reach a terminal raw (besides the line ends of the output itself).
REORDERING = "\u200b\u200c\u200d\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"


def unsafe(c: str) -> bool:
    """A character a terminal obeys or a reader is misled by (the test's own oracle)."""
    return unicodedata.category(c) in ("Cc", "Zl", "Zp") or c in REORDERING or c == "\ufeff"


hostile = st.text(
    st.one_of(
        st.characters(whitelist_categories=("Cc", "Zl", "Zp")),
        st.sampled_from(REORDERING),
        st.characters(blacklist_categories=("Cs",)),
    ),
    max_size=40,
)


@settings(max_examples=500, deadline=None)
@given(hostile)
def test_printable_escapes_every_unsafe_character_and_keeps_the_rest(text: str) -> None:
    shown = printable(text)
    assert not any(unsafe(c) for c in shown)
    if not any(unsafe(c) for c in text):
        assert shown == text
    # every unsafe character is named by its escape, in order
    named = [
        f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}" for c in text if unsafe(c)
    ]
    at = 0
    for escape in named:
        at = shown.index(escape, at) + len(escape)


@settings(max_examples=200, deadline=None)
@given(hostile)
def test_log_records_escape_control_characters_but_keep_their_lines(label: str) -> None:
    install()
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    log = logging.getLogger("nines.test.printable")
    log.addHandler(handler)
    log.propagate = False
    try:
        log.warning("series %s dropped\nsecond line", label)
    finally:
        log.removeHandler(handler)
    text = stream.getvalue()
    # the label cannot forge a line: only the message's own line ends stay
    assert text == f"series {printable(label)} dropped\nsecond line\n", repr(text)
    assert not any(unsafe(c) for c in text if c != "\n")


LABELS = [
    "c\x1b[31mRED\x1b[0m",
    "bell\x07back\x08",
    "nl\nx\r\ty\x7f\x9b2J",
    "bidi\u202eevil",
    "<script>alert(1)</script>",
]


def hostile_archive(root: Path) -> None:
    layout = HdrLayout()
    t0 = (int(time.time() * 1e6) // 3_600_000_000 - 2) * 3_600_000_000
    windows = []
    for i, cluster in enumerate(LABELS):
        values = np.random.default_rng(i).lognormal(8, 1, 500).astype(np.int64) + 1
        series = SeriesKey(cluster, "t\x1b]0;retitled\x07", "0", "e2e")
        hist = SparseHistogram.from_values(layout, values)
        windows.append(WindowHistogram("10s", t0, t0 + 10_000_000, series, hist))
    write_windows(root, 1, windows)


def nines(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "monitor", *args],
        capture_output=True, text=True, timeout=120, cwd=cwd,
        env={**os.environ, "PYTHONWARNINGS": "default"},
    )  # fmt: skip


def raw_controls(text: str) -> list[str]:
    return [repr(c) for c in text if unsafe(c) and c != "\n"]


def test_report_writes_no_control_character_to_the_terminal_or_the_page(tmp_path: Path) -> None:
    hostile_archive(tmp_path / "archive")
    for out in ("r.png", "r.html"):
        done = nines("report", "--archive", str(tmp_path / "archive"), "--out", out, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        assert raw_controls(done.stdout + done.stderr) == [], done.stderr
        assert "Glyph" not in done.stderr and "Warning" not in done.stderr, done.stderr
    page = (tmp_path / "r.html").read_text()
    assert raw_controls(page) == []
    assert "<script>" not in page and "&lt;script&gt;" in page
    assert "c\\x1b[31mRED" in page  # shown, escaped: the operator reads what the label holds


def test_an_error_line_with_control_characters_stays_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "not\x1b[2Ja\ndirectory"
    bad.write_text("")
    done = nines("report", "--archive", str(bad), "--out", "x.png", cwd=tmp_path)
    assert done.returncode == 2
    assert len(done.stderr.splitlines()) == 1 and raw_controls(done.stderr) == [], done.stderr
    assert "not\\x1b[2Ja directory is not a directory" in done.stderr  # a newline: a space
