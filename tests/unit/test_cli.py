"""The CLI front door: every subcommand has working --help, bad input exits 2 with one line."""

from __future__ import annotations

import subprocess
import sys

import pytest

from monitor.cli import build_parser

SUBCOMMANDS = sorted(build_parser()._subparsers._group_actions[0].choices)  # type: ignore[union-attr]


def nines(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "monitor", *args], capture_output=True, text=True, timeout=timeout
    )


def test_all_issue_subcommands_exist() -> None:
    assert {"broker", "probe", "stream", "demo", "report", "alerts", "dashboards"} <= set(
        SUBCOMMANDS
    )


@pytest.mark.parametrize("command", SUBCOMMANDS)
def test_help_works(command: str) -> None:
    out = nines(command, "--help")
    assert out.returncode == 0, out.stderr
    assert "usage: nines" in out.stdout


def test_top_level_help_and_version() -> None:
    out = nines("--help")
    assert out.returncode == 0 and "demo" in out.stdout
    assert nines("--version").stdout.startswith("nines ")
