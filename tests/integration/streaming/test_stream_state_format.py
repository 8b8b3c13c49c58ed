"""A checkpoint of another state format: `nines stream` says so in one line, exit 2, before
Spark starts; a new checkpoint records the format so the next change can say the same."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from kafka_cluster import unique_topic

from streaming.state_format import MARKER, STATE_FORMAT, check_state_format, recorded_format


def run_stream(bootstrap: str, topic: str, ckpt: Path) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "monitor", "stream", "--bootstrap", bootstrap,
            "--echo-topic", topic, "--checkpoint", str(ckpt), "--metrics-port", "0",
            "--master", "local[1]"]  # fmt: skip
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)


def test_an_old_checkpoint_is_refused_in_one_line(broker: Any, tmp_path: Path) -> None:
    topic = unique_topic(broker, 1)
    old = tmp_path / "old"
    (old / "offsets").mkdir(parents=True)
    (old / "offsets" / "0").write_text('v1\n{"batchWatermarkMs":0}\n{}\n')  # Spark wrote it
    done = run_stream(broker.bootstrap, topic, old)
    assert done.returncode == 2, done.stderr[-2000:]
    lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert "stream.checkpoint" in lines[0] and "state format 1" in lines[0]
    assert "new checkpoint" in lines[0]

    newer = tmp_path / "newer"
    newer.mkdir()
    (newer / MARKER).write_text(json.dumps({"state_format": STATE_FORMAT + 1}))
    done = run_stream(broker.bootstrap, topic, newer)
    assert done.returncode == 2 and f"state format {STATE_FORMAT + 1}" in done.stderr


def test_a_new_checkpoint_records_its_format(tmp_path: Path) -> None:
    ckpt = tmp_path / "ckpt"
    assert recorded_format(str(ckpt)) is None
    check_state_format(str(ckpt))
    assert json.loads((ckpt / MARKER).read_text())["state_format"] == STATE_FORMAT
    assert recorded_format(str(ckpt)) == STATE_FORMAT
    check_state_format(str(ckpt))  # its own format: accepted, again and again
    (ckpt / "offsets").mkdir()
    (ckpt / "offsets" / "0").write_text("v1\n")
    check_state_format(str(ckpt))
