"""A Kafka probe that cannot reach its cluster says so in one line; librdkafka's own lines go to
the probe's log (logger ``nines.probe.librdkafka``, DEBUG), never straight to stderr."""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from probes.kafka import LIBRDKAFKA_LOGGER, quiet

ROOT = Path(__file__).resolve().parents[3]


def closed_port() -> int:
    """A local port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_probe_at_a_closed_port_fails_in_one_line(tmp_path: Path) -> None:
    port = closed_port()
    out = subprocess.run(
        [sys.executable, "-m", "monitor", "probe", "--bootstrap", f"127.0.0.1:{port}",
         "--metrics-port", "0"],
        capture_output=True, text=True, timeout=60, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert out.returncode == 2, out.stderr
    lines = out.stderr.splitlines()
    assert len(lines) == 1, out.stderr
    assert lines[0].startswith("nines probe: error: bootstrap: cannot reach")
    assert str(port) in lines[0]
    assert "rdkafka" not in out.stderr and out.stdout == ""


def test_librdkafka_lines_reach_the_probe_log(caplog: pytest.LogCaptureFixture) -> None:
    from confluent_kafka import Consumer

    port = closed_port()
    with caplog.at_level(logging.DEBUG, logger=LIBRDKAFKA_LOGGER):
        consumer = Consumer(
            quiet({"bootstrap.servers": f"127.0.0.1:{port}", "group.id": "quiet-test"})
        )
        try:
            with pytest.raises(Exception, match="transport"):
                consumer.list_topics(timeout=1)
            consumer.poll(0.5)  # confluent-kafka serves the queued lines here
        finally:
            consumer.close()
    lines = [r for r in caplog.records if r.name == LIBRDKAFKA_LOGGER]
    assert lines and all(r.levelno == logging.DEBUG for r in lines)
    assert any(f"127.0.0.1:{port}" in r.getMessage() for r in lines)
