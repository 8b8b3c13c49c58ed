"""`nines demo` on a fresh setup: runs everything embedded and shows the high nines, exits 0."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow


def test_demo_runs_and_shows_the_quantile_table() -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "monitor",
            "demo",
            "--duration",
            "60",
            "--metrics-port",
            "0",
            "--plain",
        ],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    text = out.stdout
    assert "latest closed 10s window" in text
    for column in ("samples", "p50", "p99", "p99.9", "max", "lost"):
        assert column in text
    assert "nines.probe" in text and "stopped cleanly" in text
