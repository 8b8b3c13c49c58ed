"""``nines stream``: help with examples, and bad input is one line naming the field, exit 2."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from kafka_cluster import Cluster, unique_topic

from monitor.cli import main


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


def test_unreachable_bootstrap_exits_2_before_spark() -> None:
    out = nines_stream("--bootstrap", "127.0.0.1:1")
    assert out.returncode == 2, out.stderr
    assert out.stderr.splitlines() == [out.stderr.strip()], out.stderr
    assert out.stderr.startswith("nines stream: error: bootstrap: cannot reach 127.0.0.1:1 (")
    assert "Traceback" not in out.stderr and "Spark" not in out.stderr + out.stdout


@pytest.fixture
def no_spark(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Replace the pipeline's run (Spark) by a stub that records the configs it would run."""
    import monitor.pipeline

    started: list[object] = []

    def run_stream(config: object) -> int:
        started.append(config)
        return 0

    monkeypatch.setattr(monitor.pipeline, "run_stream", run_stream)
    return started


def test_missing_echo_topic_exits_2_before_spark(
    broker: Cluster,
    no_spark: list[object],
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = ["stream", "--bootstrap", broker.bootstrap]
    assert main([*args, "--echo-topic", "no.such.echoes"]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"nines stream: error: echo_topic: unknown topic 'no.such.echoes' on {broker.bootstrap}; "
        "create it (or run nines probe --manage-topic)\n"
    )
    assert no_spark == []
    echoes = unique_topic(broker, 2, prefix="echoes")
    assert main([*args, "--echo-topic", echoes]) == 0  # the check passes: Spark would start
    assert [c.echo_topic for c in no_spark] == [echoes]  # type: ignore[attr-defined]
