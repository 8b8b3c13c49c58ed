"""``nines stream``: help with examples, and bad input is one line naming the field, exit 2."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest


def nines_stream(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "monitor", "stream", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_help_shows_examples() -> None:
    out = nines_stream("--help")
    assert out.returncode == 0
    assert "--checkpoint" in out.stdout and "examples:" in out.stdout


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["--windows", "10s,15s"], "stream.windows"),
        (["--digits", "7"], "stream.digits"),
        (["--metrics-port", "70000"], "stream.metrics_port"),
        (["--watermark", "soon"], "stream.watermark"),
        (["--trigger", "0s"], "stream.trigger"),
    ],
)
def test_bad_values_exit_2_naming_the_field(args: list[str], field: str) -> None:
    out = nines_stream("--bootstrap", "127.0.0.1:1", *args)
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"nines stream: error: {field}:"), out.stderr


def test_bootstrap_is_required_and_yaml_is_validated_too(tmp_path: Path) -> None:
    out = nines_stream()
    assert out.returncode == 2 and "stream.bootstrap" in out.stderr
    cfg = tmp_path / "nines.yaml"
    cfg.write_text("stream: {bootstrap: 'x:1', windows: [10s, 1m], colour: blue}\n")
    out = nines_stream("--config", str(cfg))
    assert out.returncode == 2 and "stream.colour" in out.stderr, out.stderr
