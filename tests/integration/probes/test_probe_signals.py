"""SIGTERM and SIGINT end `nines probe` with exit 0 and no stack trace: sent to the process or to
its whole group (a terminal's Ctrl+C), while it starts or while it probes."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import pytest
from process_signals import assert_clean, signal_nines

from probes.summary import FIELDS, read_summary


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=lambda s: s.name)
@pytest.mark.parametrize("group", [False, True], ids=["process", "group"])
@pytest.mark.parametrize("running", [False, True], ids=["starting", "running"])
def test_a_signal_ends_the_probe_cleanly(
    broker: Any, sig: signal.Signals, group: bool, running: bool, tmp_path: Path
) -> None:
    summary = tmp_path / "summary.json"
    argv = ["probe", "--bootstrap", broker.bootstrap, "--metrics-port", "0", "--rate", "20"]
    ending = signal_nines(
        [*argv, "--summary-file", str(summary)],
        sig,
        group=group,
        ready="probing" if running else None,
        tmp=tmp_path,
    )
    assert_clean(ending)
    assert ending.stop_s < 15  # its shutdown_timeout (10 s) bounds the drain
    if running:  # the summary file holds what the log line shows humans
        totals = read_summary(summary)
        assert totals["sent"] > 0 and totals["sent"] == totals["received"], totals
        assert "stopped: " + " ".join(f"{k}={totals[k]}" for k in FIELDS) in ending.output
