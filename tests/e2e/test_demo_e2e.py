"""`nines demo` as a new user runs it: the product's screen, no JVM lines, real numbers, a story."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

#: What the JVM prints when its output reaches the terminal (log4j, Hadoop, Spark's utils).
JVM_LINES = re.compile(r"log4j|NativeCodeLoader|WARN Utils|WARN \w+:|incubator modules|setLogLevel")
ROW = re.compile(r"│\s*nines\.probe\s*│\s*(\S+)\s*│\s*(\d+)\s*│(.*)│")


def demo(workdir: Path, *flags: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "monitor", "demo", "--metrics-port", "0", "--plain",
         "--workdir", str(workdir), *flags],
        capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip


def tables(text: str) -> list[str]:
    """The printed 10s tables, oldest first (each from its title to the next title)."""
    return re.split(r"(?=latest closed 10s window)", text)[1:]


@pytest.fixture(scope="module")
def hiccup_run(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """One demo run with a 5 s broker stall at 25 s, shared by the tests below: the screen a new
    user sees and the story of the stall are both in it (one run, not two: 75 s of the suite)."""
    workdir = tmp_path_factory.mktemp("demo")
    return workdir, demo(workdir, "--duration", "75", "--hiccup", "5s@25s")


def test_demo_runs_and_shows_the_quantile_table(
    hiccup_run: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    tmp_path, out = hiccup_run
    assert out.returncode == 0, out.stderr[-3000:]
    screen = out.stdout + out.stderr
    assert not JVM_LINES.search(screen), JVM_LINES.search(screen)
    assert out.stderr == ""
    # the JVM's lines went to the log file the screen names
    assert f"Spark/JVM: {tmp_path / 'spark.log'}" in out.stdout
    # the JVM's own lines (Java 17's "Using incubator modules") went there; Spark's log4j lines
    # are errors only (streaming.jvm_log), so a healthy run writes no more
    assert (tmp_path / "spark.log").stat().st_size > 0
    assert "latest closed 10s window" in out.stdout and "stopped cleanly" in out.stdout
    for column in ("samples", "p50", "p99", "p99.9", "max", "lost", "probe pause"):
        assert column in out.stdout
    assert "p0.999" not in out.stdout  # one quantile vocabulary: p99.9
    assert "e2e p99.9 <= 0.1s per 1m" in out.stdout
    # a full 10s window at 100 msgs/s per partition: 1,000 samples each, p50 a number in ms
    full = [m for t in tables(out.stdout) for m in ROW.finditer(t) if m.group(1) != "all"]
    assert full and any(int(m.group(2)) == 1000 for m in full), full
    p50_ms = float(full[-1].group(3).split("│")[0])
    assert 0 < p50_ms < 1000
    assert "longest own pause" in out.stdout


def test_demo_hiccup_shows_the_breach_and_the_broker_as_its_cause(
    hiccup_run: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    """A 5 s broker stall: the 10s window holding it has a max of about 5 s and the SLA breaches;
    the probe's own pauses stay small, so the screen blames the broker; later windows recover."""
    _, out = hiccup_run
    assert out.returncode == 0, out.stderr[-3000:]
    assert "broker SIGSTOPped for 5s" in out.stdout and "broker SIGCONTinued" in out.stdout
    shown = tables(out.stdout)
    maxes = []
    for t in shown:
        rows = [m for m in ROW.finditer(t) if m.group(1) == "all"]
        maxes.append(float(rows[0].group(3).split("│")[-3]) / 1e3 if rows else 0.0)
    stalled = [i for i, m in enumerate(maxes) if m > 2.0]
    assert stalled, maxes
    # the open-loop probe counts the stall for every message: a max of about the stall's length
    assert 3.0 < max(maxes) < 7.0, maxes
    assert re.search(r"e2e max <= 2s per 10s\s*│\s*e2e-max\s*│\s*[\d.]+\s*│\s*BREACH", out.stdout)
    assert "the tail is the broker's" in shown[stalled[0]]
    # recovery: a later 10s window's max is back far under the stall and the SLA's 2 s
    assert any(m < 1.0 for m in maxes[stalled[-1] + 1 :]), maxes
