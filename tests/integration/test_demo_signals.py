"""SIGTERM and SIGINT end `nines demo` (broker, probe and Spark job in one) with exit 0 and no
stack trace, sent to its whole process group as a terminal's Ctrl+C is: the probe child and the
Spark JVM get the signal too."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from process_signals import assert_clean, signal_nines

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=lambda s: s.name)
def test_a_signal_to_the_group_ends_the_demo_cleanly(sig: signal.Signals, tmp_path: Path) -> None:
    ending = signal_nines(
        ["demo", "--plain", "--metrics-port", "0", "--workdir", str(tmp_path / "demo")],
        sig,
        group=True,
        ready="Ctrl+C to stop.",
        tmp=tmp_path,
    )
    assert_clean(ending)
    assert "nines demo: stopped cleanly." in ending.output
    logs = "".join(p.read_text(errors="replace") for p in (tmp_path / "demo").glob("*.log"))
    assert "Cannot call methods on a stopped SparkContext" not in logs
    assert "Traceback" not in logs
