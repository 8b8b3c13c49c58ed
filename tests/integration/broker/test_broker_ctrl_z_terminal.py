"""Ctrl+Z and ``fg`` in a real terminal stall and resume every broker of ``nines broker``, on
every engine, and nothing exits; Ctrl+C then ends it with exit 0.

The path a person takes: an interactive shell with job control on a pseudo-terminal runs the
command; the test types Ctrl+Z (the kernel sends SIGTSTP to the foreground group), checks that
every process of the job is stopped and that a client's request waits, types ``fg`` and checks
that the same processes run and that the request is answered.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest
from kafka_cluster import producer, wait_for
from terminal import Terminal, group_members, process_state

from testbroker.control import ReadyInfo

ROOT = Path(__file__).resolve().parents[3]
#: How long the job stays stopped: longer than a client's request would take on a live broker.
STOP_S = 3.0


@pytest.fixture(params=["mock", "tansu", "kafka"])
def engine(request: pytest.FixtureRequest) -> str:
    # the session's checks: skip without the engine, fail under CI (tests/conftest.py)
    if request.param == "tansu":
        request.getfixturevalue("tansu_binary")
    if request.param == "kafka":
        request.getfixturevalue("require_kafka_jars")
    return str(request.param)


def test_ctrl_z_then_fg_stalls_and_resumes_every_broker(engine: str, tmp_path: Path) -> None:
    ready = tmp_path / "ready"
    brokers = {"mock": 3, "tansu": 1, "kafka": 2}[engine]
    term = Terminal(str(ROOT))
    try:
        term.type(
            f"{sys.executable} -m monitor broker --engine {engine} --brokers {brokers} "
            f"--ready-file {ready} 2>{tmp_path / 'stderr'}\n"
        )
        wait_for(ready.exists, timeout_s=180)
        info = ReadyInfo.read(ready)
        assert os.getpgid(info.pid) == info.pid  # the shell made the job its own group
        members = group_members(info.pid)
        # mock: one process; tansu: nines broker + Tansu; kafka: nines broker + a JVM a broker
        assert len(members) == {"mock": 1, "tansu": 2, "kafka": 1 + brokers}[engine], members
        prod = producer(info.bootstrap, **{"message.timeout.ms": 60_000})
        prod.produce("nines.echoes", b"before")
        assert prod.flush(30) == 0

        term.type("\x1a")  # Ctrl+Z
        term.wait_for("Stopped", timeout_s=10)
        wait_for(lambda: all(process_state(p) == "T" for p in members), timeout_s=10)
        acked: list[bool] = []
        prod.produce("nines.echoes", b"stalled", on_delivery=lambda e, m: acked.append(e is None))
        t0 = time.monotonic()
        while time.monotonic() - t0 < STOP_S:
            prod.poll(0.1)
        assert acked == [], "a stopped broker answered"
        assert all(process_state(p) == "T" for p in members)

        term.type("fg\n")
        wait_for(lambda: all(process_state(p) not in ("T", "") for p in members), timeout_s=10)
        assert prod.flush(60) == 0 and acked == [True], "the broker did not resume"
        time.sleep(1)
        assert sorted(group_members(info.pid)) == sorted(members), "a process exited after fg"

        term.type("\x03")  # Ctrl+C: SIGINT to the group, a clean end
        t_int = time.monotonic()
        term.type('echo "ex""it=$?"\n')  # the typed line does not match what it prints
        screen = term.wait_for("exit=", timeout_s=120)
        assert "exit=0" in screen, screen[-2000:]
        print(f"\n{engine}: Ctrl+C to the prompt in {time.monotonic() - t_int:.1f} s")
        wait_for(lambda: not any(process_state(p) for p in members), timeout_s=30)
        assert "Traceback" not in (tmp_path / "stderr").read_text()
    finally:
        term.close()
