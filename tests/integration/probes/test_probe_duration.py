"""``--duration`` through the CLI on the mock cluster: ``--rate 0.1 --duration 6s`` stopped after
3.4 s, with exit 0; the probe now runs the whole duration (its log's first and last lines)."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from datetime import datetime
from typing import Any

STAMP = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) nines\.probe INFO (probing|stopped)")


def test_rate_0_1_for_6s_probes_6s_on_the_mock(broker: Any) -> None:
    started = time.monotonic()
    out = subprocess.run(
        [sys.executable, "-m", "monitor", "probe", "--bootstrap", broker.bootstrap,
         "--rate", "0.1", "--duration", "6s", "--metrics-port", "0"],
        capture_output=True, text=True, timeout=90, check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    stamps = {}
    for line in out.stderr.splitlines():
        m = STAMP.match(line)
        if m:
            stamps[m.group(2)] = datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f")
    assert set(stamps) == {"probing", "stopped"}, out.stderr[-2000:]
    probed_s = (stamps["stopped"] - stamps["probing"]).total_seconds()
    assert probed_s >= 6.0 - 0.01, probed_s
    assert time.monotonic() - started >= 6.0
