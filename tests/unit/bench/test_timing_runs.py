"""bench.timing_runs (the timing set run N times, tallied) and its docs/benchmarks.md section."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from bench import timing_runs
from bench.report_timing import section

FILES = ["tests/unit/a/test_x.py"]


def part(outcomes: dict[str, list[str]], commit: str, seconds: list[float]) -> dict[str, Any]:
    """A tally of ``len(seconds)`` runs: each test's outcome per run."""
    tally: dict[str, dict[str, int]] = {}
    for name, runs in outcomes.items():
        for outcome in runs:
            tally.setdefault(name, {}).setdefault(outcome, 0)
            tally[name][outcome] += 1
    sitting = {"git_commit": commit, "timestamp": "2026-12-07T16:00:00Z", "runs": len(seconds)}
    return {"files": FILES, "runs": len(seconds), "seconds": seconds,
            "loads": [0.5] * len(seconds), "sittings": [sitting], "tally": tally}  # fmt: skip


A, B = "tests.unit.a.test_x::test_a", "tests.unit.a.test_x::test_b"


def test_merge_adds_runs_and_outcomes_and_keeps_each_sitting_in_order() -> None:
    first = part({A: ["passed"] * 2, B: ["passed", "failed"]}, "aaa", [10, 12])
    second = part({A: ["passed"] * 3, B: ["passed"] * 3}, "bbb", [11, 9, 13])
    merged = timing_runs.merge(first, second)
    assert merged["runs"] == 5 and merged["seconds"] == [10, 12, 11, 9, 13]
    assert merged["tally"] == {A: {"passed": 5}, B: {"passed": 4, "failed": 1}}
    assert [s["git_commit"] for s in merged["sittings"]] == ["aaa", "bbb"]
    assert timing_runs.failing(merged) == {B: {"passed": 4, "failed": 1}}


def test_tallies_of_other_files_are_not_merged() -> None:
    other = part({A: ["passed"]}, "bbb", [1]) | {"files": ["tests/unit/b/test_y.py"]}
    with pytest.raises(ValueError, match="different files"):
        timing_runs.merge(part({A: ["passed"]}, "aaa", [1]), other)


def test_the_section_counts_each_part_and_file_and_names_what_failed() -> None:
    flaky = part({A: ["passed"] * 3, B: ["passed", "failed", "passed"]}, "aaa", [10, 30, 20])
    text = section({"unit": flaky})
    assert "| unit | 1 | 2 | 3 | 1 of 2 | 20 (10-30) | 0.5 (0.5-0.5) |" in text
    assert "| `tests/unit/a/test_x.py` | 2 | 5 of 6 |" in text
    assert f"- `{B}`: passed 2, failed 1" in text
    assert "Every test passed" not in text
    clean = section({"unit": part({A: ["passed"] * 2}, "aaa", [1, 2])})
    assert "Every test passed every run." in clean and "| 1 of 1 |" in clean


def test_no_runs_yet_says_how_to_make_them() -> None:
    assert "Not measured yet: `make timing`" in section({})


def test_a_real_sitting_tallies_pytest_and_a_merge_keeps_the_other_part(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two runs of a real test file (one test passes, one fails on its second run), merged with
    an earlier sitting; the result file's other part stays as it was."""
    counter = tmp_path / "count"
    probe = tmp_path / "test_probe_file.py"
    probe.write_text(
        "from pathlib import Path\n"
        f"COUNT = Path({str(counter)!r})\n"
        "def test_steady():\n    pass\n"
        "def test_second_run_fails():\n"
        "    n = int(COUNT.read_text()) if COUNT.exists() else 0\n"
        "    COUNT.write_text(str(n + 1))\n"
        "    assert n == 0\n"
    )
    set_ = {"unit": [str(probe)], "e2e": ["tests/e2e/none.py"]}
    out = tmp_path / "timing.json"
    out.write_text(json.dumps({"parts": {"e2e": {"kept": True}}}))
    earlier = tmp_path / "earlier.json"
    earlier.write_text(json.dumps(part({}, "aaa", [5.0]) | {"files": [str(probe)]}))
    monkeypatch.setattr(timing_runs, "TIMING_SET", set_)
    rc = timing_runs.main(
        ["--runs", "2", "--only", "unit", "--merge", str(earlier), "--out", str(out)]
    )
    assert rc == 1  # a test that failed once fails the tally
    parts = json.loads(out.read_text())["parts"]
    assert parts["e2e"] == {"kept": True}
    unit = parts["unit"]
    assert unit["runs"] == 3 and len(unit["seconds"]) == 3 and unit["seconds"][0] == 5.0
    steady, second = (f"{probe.stem}::test_{n}" for n in ("steady", "second_run_fails"))
    assert {k.split(".")[-1]: v for k, v in unit["tally"].items()} == {
        steady: {"passed": 2},
        second: {"passed": 1, "failure": 1},
    }
    (failure,) = unit["failures"]  # what failed, and why: junit's message
    assert failure["run"] == 2 and failure["test"].endswith(second)
    assert "assert 1 == 0" in failure["message"]
    assert [s["runs"] for s in unit["sittings"]] == [1, 2]


def test_a_sitting_cut_short_keeps_the_runs_it_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[int] = []

    def run_once(files: list[str], report: Path) -> dict[str, str]:
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt  # Ctrl+C during the second run
        return {A: "passed"}

    out = tmp_path / "timing.json"
    monkeypatch.setattr(timing_runs, "run_once", run_once)
    with pytest.raises(KeyboardInterrupt):
        timing_runs.main(["--runs", "10", "--only", "unit", "--out", str(out)])
    unit = json.loads(out.read_text())["parts"]["unit"]
    assert unit["runs"] == 1 and unit["tally"] == {A: {"passed": 1}}
    assert unit["sittings"][0]["runs"] == 1


def test_a_stopped_run_lets_pytest_tear_its_fixtures_down(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl+C during a run: pytest gets SIGINT and time to stop what its fixtures started (it
    was killed 0.25 s later, and a stopped sitting left Kafka, Spark and Prometheus running).

    No clock decides anything here: the held test never ends by itself, Ctrl+C comes once it
    has started, and the teardown's allowance is raised so that only its absence fails. This
    process takes SIGINT as a terminal's Ctrl+C: ``make test`` starts it in the background,
    where the shell has SIGINT ignored (CI's run never raised, twice)."""
    started, torn_down = tmp_path / "started", tmp_path / "torn-down"
    test = tmp_path / "test_held.py"
    test.write_text(
        "import time\nfrom pathlib import Path\nimport pytest\n"
        "@pytest.fixture(scope='session')\n"
        "def cluster():\n"
        "    yield\n"
        "    time.sleep(1)  # a broker's orderly stop\n"
        f"    Path({str(torn_down)!r}).write_text('down')\n"
        "def test_held(cluster):\n"
        f"    Path({str(started)!r}).write_text('up')\n"
        "    time.sleep(86400)\n"
    )
    monkeypatch.setattr(timing_runs, "TEARDOWN_S", 400.0)
    sigint = signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a terminal
    returned = threading.Event()

    def interrupt() -> None:
        while not started.exists() and not returned.is_set():
            time.sleep(0.05)
        if not returned.is_set():  # the run is under way: Ctrl+C in the runner's terminal
            os.kill(os.getpid(), signal.SIGINT)

    threading.Thread(target=interrupt, daemon=True).start()
    try:
        with pytest.raises(KeyboardInterrupt):
            timing_runs.run_once([str(test)], tmp_path / "junit.xml")
    finally:
        returned.set()
        signal.signal(signal.SIGINT, sigint)
    assert started.exists() and torn_down.read_text() == "down"


def test_pytest_takes_ctrl_c_even_from_a_runner_that_ignores_it(tmp_path: Path) -> None:
    """A runner started in the background by a shell has SIGINT ignored, and an ignored signal
    stays ignored across exec: its pytest would never take the SIGINT that asks it to tear
    down. The run's pytest starts with SIGINT's default, so Python's Ctrl+C handler is in."""
    test = tmp_path / "test_sigint.py"
    test.write_text(
        "import signal\n"
        "def test_sigint_is_ctrl_c():\n"
        "    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler\n"
    )
    sigint = signal.signal(signal.SIGINT, signal.SIG_IGN)  # as `make test`'s background runs
    try:
        outcomes = timing_runs.run_once([str(test)], tmp_path / "junit.xml")
    finally:
        signal.signal(signal.SIGINT, sigint)
    assert list(outcomes.values()) == ["passed"], outcomes
