"""Under CI=true nothing may skip: a test that skips there fails, with its reason."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parents[2]


def run(tmp_path: Path, ci: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "test_skips.py").write_text(
        "import pytest\n\ndef test_needs_a_tool():\n    pytest.skip('no such tool')\n\n"
        "def test_passes():\n    pass\n"
    )
    env = {**os.environ, "CI": ci, "PYTHONPATH": str(TESTS)}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "real_components", "-p", "no:cacheprovider",
         "-o", "addopts=", "--rootdir", str(tmp_path), str(tmp_path)],
        capture_output=True, text=True, env=env, timeout=60, cwd=tmp_path,
    )  # fmt: skip


def test_a_skip_fails_under_ci(tmp_path: Path) -> None:
    out = run(tmp_path, "true")
    assert out.returncode == 1, out.stdout
    assert "1 failed, 1 passed" in out.stdout
    assert "skipped under CI=true, where nothing may skip" in out.stdout
    assert "no such tool" in out.stdout


def test_a_skip_is_a_skip_outside_ci(tmp_path: Path) -> None:
    out = run(tmp_path, "")
    assert out.returncode == 0, out.stdout
    assert "1 passed, 1 skipped" in out.stdout
