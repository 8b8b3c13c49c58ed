"""A full disk under the files a command writes: one line naming the file, exit 2, nothing left.

On a real tmpfs filled to its last byte: `nines probe --summary-file` ended a clean run with a
24-line traceback and left a 0-byte ``.tmp``; `nines report --out` left a 0-byte plot, and with
``--hlog`` on the full disk its line blamed ``--out``.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from full_disk import fill, left_besides_filler, tmpfs

NO_SPACE = "No space left on device"


@pytest.fixture
def full(tmp_path: Path) -> Iterator[Path]:
    """A 1 MiB tmpfs with no byte free."""
    with tmpfs(tmp_path / "full", "1m") as where:
        fill(where)
        yield where


def nines(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "monitor", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def refused(res: subprocess.CompletedProcess[str], command: str) -> str:
    """Exit 2, no traceback, the last line the error; that line."""
    assert res.returncode == 2, res.stderr[-3000:]
    assert "Traceback" not in res.stderr, res.stderr[-3000:]
    last = res.stderr.strip().splitlines()[-1]
    assert last.startswith(f"nines {command}: error: "), res.stderr[-3000:]
    return last


def test_the_probes_summary_file_on_a_full_disk(broker: Any, full: Path) -> None:
    summary = full / "summary.json"
    res = nines("probe", "--bootstrap", broker.bootstrap, "--metrics-port", "0", "--rate", "20",
                "--duration", "1s", "--summary-file", str(summary))  # fmt: skip
    last = refused(res, "probe")
    assert last.endswith(f"probe.summary_file: cannot write {summary}: {NO_SPACE}"), last
    assert "stopped: sent=" in res.stderr  # the run itself ended cleanly
    assert left_besides_filler(full) == []


@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An archive of two 10 s windows of one series."""
    from core.hdr import HdrLayout, SparseHistogram
    from core.windows import SeriesKey, WindowHistogram
    from streaming.archive import write_windows

    home, t0_us = tmp_path_factory.mktemp("report"), 1_795_000_000_000_000
    windows = [
        WindowHistogram(
            "10s",
            t0_us + i * 10_000_000,
            t0_us + (i + 1) * 10_000_000,
            SeriesKey("c", "nines.probe", "0", "e2e"),
            SparseHistogram.from_values(HdrLayout(), np.arange(1, 3000) * (i + 1)),
        )
        for i in range(2)
    ]
    write_windows(home / "archive", 1, windows)
    return home / "archive"


@pytest.mark.parametrize("name", ["latency.png", "latency.html"])
def test_the_report_on_a_full_disk(archive: Path, full: Path, name: str) -> None:
    out = full / name
    last = refused(nines("report", "--archive", str(archive), "--out", str(out)), "report")
    # the PNG beside an HTML page is the first file written
    written = out if name.endswith(".png") else out.with_suffix(".png")
    assert last.endswith(f"out: cannot write {written}: {NO_SPACE}"), last
    assert left_besides_filler(full) == []


def test_the_reports_hlog_on_a_full_disk_is_named(
    archive: Path, full: Path, tmp_path: Path
) -> None:
    out, hlog = tmp_path / "latency.png", full / "latency.hlog"
    res = nines("report", "--archive", str(archive), "--out", str(out), "--hlog", str(hlog))
    last = refused(res, "report")
    assert last.endswith(f"hlog: cannot write {hlog}: {NO_SPACE}"), last
    assert left_besides_filler(full) == []
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"  # the plot, elsewhere, is whole
