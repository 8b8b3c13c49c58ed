"""A probe whose thread dies ends non-zero with one line, through the real ``nines probe``.

A preload (``sitecustomize`` on PYTHONPATH) installs a profile function in every thread that
raises in the threads it is told to kill, half a second after each first runs Python: the
death comes mid-loop, wherever that thread happens to be. The threads to kill are generated
from the probe itself: the first run kills the sender and records every thread the probe ran;
each of the others is then killed in turn, and all of them at once (what a preload that made
``time.sleep`` raise did: the probe logged a clean stop and exited 0).
"""

from __future__ import annotations

import os
import subprocess
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from kafka_cluster import Cluster

from monitor.processes import probe_argv

ROOT = Path(__file__).resolve().parents[3]

PRELOAD = """
import os, threading, time
KILL = os.environ["NINES_TEST_KILL"]  # a thread name, or "*": every nines-* thread
SEEN = os.environ["NINES_TEST_THREADS"]
first = {}

def profile(frame, event, arg):
    name = threading.current_thread().name
    if not name.startswith("nines-"):
        return
    if name not in first:
        first[name] = time.monotonic()
        with open(SEEN, "a") as f:
            f.write(name + "\\n")
    if KILL in (name, "*") and time.monotonic() - first[name] > 0.5:
        raise RuntimeError("injected in " + name)

threading.setprofile(profile)
"""


def kill(
    cluster: Cluster, thread: str, tmp: Path
) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    """Run ``nines probe`` (no duration: only a death ends it) killing ``thread``."""
    run = tmp / uuid.uuid4().hex[:8]
    run.mkdir()
    (run / "sitecustomize.py").write_text(PRELOAD)
    # a dead receiver or delivery-report thread leaves messages that never resolve: the stop
    # waits shutdown_timeout for them, 10 s by default
    (run / "probe.yaml").write_text("probe:\n  shutdown_timeout: 1s\n")
    seen = run / "threads"
    env = {
        **os.environ,
        "PYTHONPATH": f"{run}{os.pathsep}{ROOT}",
        "NINES_TEST_KILL": thread,
        "NINES_TEST_THREADS": str(seen),
    }
    argv = probe_argv(cluster.bootstrap, f"death-{run.name}", "--rate", "50")
    argv += ["--config", str(run / "probe.yaml")]
    # no --duration, so nothing but the death ends the run; one that hangs times out
    out = subprocess.run(argv, capture_output=True, text=True, timeout=60, cwd=ROOT, env=env)
    names = set(seen.read_text().split()) if seen.exists() else set()
    return out, names


def assert_died(out: subprocess.CompletedProcess[str], thread: str) -> None:
    assert out.returncode == 1, out.stderr
    last = out.stderr.strip().splitlines()[-1]
    assert f"the probe stops: thread {thread} died: RuntimeError: injected in {thread}" in last, (
        out.stderr
    )
    assert "Traceback" not in out.stderr, out.stderr  # one line, no thread's traceback


def test_any_probe_thread_that_dies_ends_the_probe_non_zero(
    broker: Cluster, tmp_path: Path
) -> None:
    out, names = kill(broker, "nines-send", tmp_path)
    assert_died(out, "nines-send")
    # the probe's threads as it ran them: each is a variant
    assert {"nines-send", "nines-receive", "nines-acks", "nines-house", "nines-hiccup"} <= names
    others = sorted(names - {"nines-send"})
    with ThreadPoolExecutor(len(others) + 1) as pool:  # one probe process each, side by side
        runs = list(pool.map(lambda t: kill(broker, t, tmp_path), [*others, "*"]))
    for thread, (out, _) in zip(others, runs, strict=False):
        assert_died(out, thread)
    out, _ = runs[-1]  # all at once: the first to die is named
    assert out.returncode == 1 and "Traceback" not in out.stderr, out.stderr
    last = out.stderr.strip().splitlines()[-1]
    assert "the probe stops: thread nines-" in last and "RuntimeError: injected" in last, last
