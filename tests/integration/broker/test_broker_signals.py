"""SIGTERM and SIGINT end `nines broker` with exit 0 and no stack trace: sent to the process or to
its whole group (a terminal's Ctrl+C), while it starts or while it runs."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from process_signals import assert_clean, signal_nines


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=lambda s: s.name)
@pytest.mark.parametrize("group", [False, True], ids=["process", "group"])
@pytest.mark.parametrize("running", [False, True], ids=["starting", "running"])
def test_a_signal_ends_the_broker_cleanly(
    sig: signal.Signals, group: bool, running: bool, tmp_path: Path
) -> None:
    ending = signal_nines(
        ["broker"],
        sig,
        group=group,
        ready="broker(s), control" if running else None,
        tmp=tmp_path,
    )
    assert_clean(ending)
    assert ending.stop_s < 10
