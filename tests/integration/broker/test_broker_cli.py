"""``nines broker`` and ``nines broker ctl`` as a user runs them: real processes and exit codes."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from kafka_cluster import producer

from testbroker import EmbeddedBroker
from testbroker.control import ControlError, ReadyInfo


def nines(*args: str, timeout_s: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "monitor", *args], capture_output=True, text=True, timeout=timeout_s
    )


def test_help_says_what_it_is_and_is_not() -> None:
    out = nines("broker", "--help")
    assert out.returncode == 0, out.stderr
    text = " ".join(out.stdout.split())
    assert "NOT a production broker" in text
    assert "retention limit of 5 MiB" in text
    assert "examples:" in text and "nines broker ctl" in text
    ctl = nines("broker", "ctl", "--help")
    assert ctl.returncode == 0 and "leader TOPIC PARTITION BROKER" in ctl.stdout


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["--brokers", "0"], "broker.brokers"),
        (["--topic", "bad"], "broker.topics.0"),
        (["--topic", "a:0"], "broker.topics.0"),
        (["--port", "70000"], "broker.port"),
    ],
)
def test_bad_input_exits_2_with_one_line_naming_the_field(args: list[str], field: str) -> None:
    out = nines("broker", *args, timeout_s=30)
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and field in lines[0], out.stderr


def test_bad_yaml_key_exits_2(tmp_path: Path) -> None:
    cfg = tmp_path / "nines.yaml"
    cfg.write_text("broker:\n  brokers: 2\n  partitions: 4\n")
    out = nines("broker", "--config", str(cfg), timeout_s=30)
    assert out.returncode == 2 and "broker.partitions: unknown key" in out.stderr


def test_runs_until_sigterm_prints_bootstrap_and_exits_0(tmp_path: Path) -> None:
    cfg = tmp_path / "nines.yaml"
    cfg.write_text("broker:\n  brokers: 2\n  topics: ['orders:4']\n")
    ready = tmp_path / "ready"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "monitor",
            "broker",
            "--config",
            str(cfg),
            "--ready-file",
            str(ready),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().strip()  # printed once ready
        info = ReadyInfo.read(ready)
        assert line == info.bootstrap and info.pid == proc.pid
        md = producer(line).list_topics(timeout=10)
        assert sorted(md.brokers) == [1, 2]
        assert sorted(md.topics["orders"].partitions) == [0, 1, 2, 3]
        assert "nines.probe" not in md.topics  # --topic/topics replace the defaults
    finally:
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(10)
    assert rc == 0
    assert not ready.exists()


def test_ctl_commands_and_errors(fresh_broker: EmbeddedBroker) -> None:
    rf = str(fresh_broker.ready_file)
    assert nines("broker", "ctl", "--ready-file", rf, "rtt", "2", "5").returncode == 0
    assert nines("broker", "ctl", "--ready-file", rf, "create-topic", "cli.t", "6").returncode == 0
    out = nines("broker", "ctl", "--ready-file", rf, "leader", "cli.t", "5", "1")
    assert out.returncode == 0 and out.stdout.strip() == "ok"
    md = producer(fresh_broker.bootstrap).list_topics("cli.t", timeout=10)
    assert len(md.topics["cli.t"].partitions) == 6
    assert md.topics["cli.t"].partitions[5].leader == 1
    boot = nines("broker", "ctl", "--ready-file", rf, "bootstrap")
    assert boot.stdout.strip() == fresh_broker.bootstrap

    out = nines("broker", "ctl", "--ready-file", rf, "down", "9")
    assert out.returncode == 1 and "broker must be 1..3" in out.stderr
    # The same errors through the library handle (same socket, no interpreter start per case).
    for bad, why in [
        (["down", "9"], "broker must be 1..3"),
        (["leader", "nope-topic", "0", "1"], "unknown topic 'nope-topic'"),
        (["leader", "cli.t", "6", "1"], "partitions 0..5"),
        (["create-topic", "cli.t", "2"], "already exists"),
        (["rtt", "1"], "takes 2 argument"),
        (["explode"], "unknown command"),
        (["rtt", "x", "5"], "invalid literal"),
    ]:
        with pytest.raises(ControlError, match=re.escape(why)):
            fresh_broker.ctl(*bad)
    missing = nines("broker", "ctl", "--ready-file", "/nonexistent/ready", "ping")
    assert missing.returncode == 2


def test_ready_file_absent_until_listening_and_start_failure_reported() -> None:
    broker = EmbeddedBroker(brokers=2, topics=[("x", 1), ("x", 2)])
    t0 = time.monotonic()
    with pytest.raises(Exception, match="listed twice"):
        broker.start()
    assert time.monotonic() - t0 < 30
