"""``make test``: the suite in parts, two halves side by side, the timing-sensitive set last.

The suite waits on brokers, Spark, Prometheus and sleeps most of its time (about 0.6 of a core
on 2, docs/benchmarks.md), so one pytest after another leaves the machine half idle: CI took
45 min 5 s in one main pytest (2026-12-07). The parts, each its own pytest (its own temp dir; no
cache but the foreground parts'):

1. ``unit``, the unit tests that time nothing and need no build, at nice 19 for the whole run
   (as the builds: they take only what the rest leaves idle).
2. ``main-a`` (the stream job's tests) and ``main-b`` (the rest, and the background builds)
   side by side at nice 0, ``main-b`` in the foreground.
3. ``auth``, Kafka's authentication and authorizer tests (OIDC from Keycloak, MSK IAM, ACLs), at
   nice 10 from the end of the first half on: they mostly wait out token lifetimes, and their
   start (Keycloak, two Kafkas) would add to the halves' (all four at once reached load 17 and
   failed a stream test's latency bound, a CI-like run of 2026-12-07).
4. ``timing`` once both halves are done: the tests whose assertions read a clock, a CPU counter
   or a count after a sleep (``bench.timing_runs``' set, issue 41), with only ``auth`` and the
   rest of ``unit`` beside, as they had in the single main run whose CI they passed.

Each part's pytest starts with SIGINT's default (``testkit.sigint``): Ctrl+C reaches every part
(they share the terminal's process group), each tears its fixtures down and the runner waits
for them, and starts nothing more. The run fails if any part does; a logged part's whole log is
printed when it failed, its slowest tests otherwise. ``tests/unit/repo/test_suite_parts.py``
checks that every test file is in exactly one part.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from testkit.sigint import default_sigint

ROOT = Path(__file__).resolve().parent.parent

UNIT = (
    "tests/unit/streaming", "tests/unit/archive", "tests/unit/core", "tests/unit/report",
    "tests/unit/dashboards", "tests/unit/helm", "tests/unit/kafkautil", "tests/unit/bench",
    "tests/unit/repo", "tests/unit/broker", "tests/unit/test_bad_inputs.py",
    "tests/unit/test_cli.py", "tests/unit/test_compare.py", "tests/unit/test_demo_cli.py",
    "tests/unit/test_flags_from_models.py", "tests/unit/test_pipeline.py",
    "tests/unit/test_settings_defaults.py", "tests/unit/test_terminal_tables.py",
    "tests/unit/test_url_secrets_any_characters.py", "tests/unit/test_secrets_never_printed.py",
)  # fmt: skip
AUTH = (
    "tests/integration/probes/test_oidc_kafka.py",
    "tests/integration/probes/test_msk_iam_kafka.py",
    "tests/integration/test_least_privilege.py",
)
#: The stream job's tests, CPU-bound (Spark) where the rest mostly waits: one half alone, the
#: other half everything else (both background builds start there). A CI-like run with the
#: chart's and the other unit tests in this half too: 1,384 s against the other's 920 s.
MAIN_A = ("tests/integration/streaming",)


def timing_files() -> tuple[str, ...]:
    """The timing-sensitive set, as ``bench.timing_runs`` lists it (its one place)."""
    from bench.timing_runs import TIMING_SET

    return tuple(f for files in TIMING_SET.values() for f in files)


@dataclass(frozen=True)
class Part:
    """One pytest of the run: its paths, what it leaves to the other parts, its nice value,
    and its log (None: the terminal)."""

    name: str
    paths: tuple[str, ...]
    ignore: tuple[str, ...] = ()
    nice: int = 0
    log: str | None = None
    durations: int = 20

    def basetemp(self) -> Path:
        """Its pytest's own temp dir: short (sockets' paths), and this run's alone."""
        return Path(tempfile.gettempdir()) / f"nines-test-{os.getpid()}-{self.name}"

    def argv(self, extra: Sequence[str]) -> list[str]:
        """The pytest command line (paths relative to the repository's root)."""
        argv = [sys.executable, "-m", "pytest", f"--durations={self.durations}"]
        argv += [f"--basetemp={self.basetemp()}"]
        if self.log is not None:  # one cache, the foreground parts' (they run one at a time)
            argv += ["-p", "no:cacheprovider"]
        argv += [f"--ignore={p}" for p in self.ignore]
        return [*argv, *extra, *self.paths]


def parts() -> dict[str, Part]:
    """The run's parts, by name, in the order they start."""
    timing = timing_files()
    return {
        "unit": Part("unit", UNIT, nice=19, log=".pytest-unit.log", durations=5),
        "auth": Part("auth", AUTH, nice=10, log=".pytest-auth.log", durations=10),
        "main-a": Part("main-a", MAIN_A, ignore=timing, log=".pytest-main-a.log", durations=20),
        "main-b": Part("main-b", ("tests",), ignore=(*UNIT, *AUTH, *timing, *MAIN_A)),
        "timing": Part("timing", timing, durations=30),
    }


class Running:
    """A part's pytest, started; its wall time once done."""

    def __init__(self, part: Part, extra: Sequence[str]) -> None:
        self.part, self.started = part, time.monotonic()
        out = None if part.log is None else (ROOT / part.log).open("wb")

        def preexec() -> None:
            default_sigint()
            os.nice(part.nice)

        try:
            self.proc = subprocess.Popen(
                part.argv(extra), cwd=ROOT, stdout=out, stderr=subprocess.STDOUT if out else None,
                preexec_fn=preexec,
            )  # fmt: skip
        finally:
            if out is not None:
                out.close()
        self.seconds, self.interrupted = 0.0, False
        # its own wall time, whenever the runner comes to wait for it
        self._watch = threading.Thread(target=self._ended, daemon=True)
        self._watch.start()

    def _ended(self) -> None:
        self.proc.wait()
        self.seconds = time.monotonic() - self.started

    def wait(self) -> int:
        """Its exit status, once it ends (a Ctrl+C meanwhile reached it too: it tears down).
        Its temp dir goes when it passed."""
        while True:
            try:
                code = self.proc.wait()
                break
            except KeyboardInterrupt:
                self.interrupted = True  # the part got the same SIGINT; wait for its teardown
        self._watch.join()
        if code == 0:
            shutil.rmtree(self.part.basetemp(), ignore_errors=True)
        return code

    def report(self, code: int) -> None:
        """A side part's summary (its whole log if it failed)."""
        part = self.part
        head = f"== {part.name} ({len(part.paths)} paths, nice {part.nice}): {self.seconds:.0f} s"
        if part.log is None:
            print(f"{head}, exit {code}", flush=True)
            return
        text = (ROOT / part.log).read_text(errors="replace")
        if code != 0:
            print(f"{head}, FAILED (exit {code}); its log:\n{text}", flush=True)
            return
        lines = text.strip().splitlines()
        first = next((i for i, ln in enumerate(lines) if "slowest " in ln), len(lines) - 1)
        print(f"{head}, passed\n" + "\n".join(lines[first:]), flush=True)


def run(extra: Sequence[str]) -> int:
    """The whole run; 0 when every part passed."""
    every = parts()
    codes: dict[str, int] = {}
    unit, half_a = Running(every["unit"], extra), Running(every["main-a"], extra)
    half_b = Running(every["main-b"], extra)
    later: list[Running] = []
    interrupted = False
    try:
        while half_a.proc.poll() is None and half_b.proc.poll() is None:
            time.sleep(1)
        later.append(Running(every["auth"], extra))
    except KeyboardInterrupt:
        interrupted = True
    for half in (half_b, half_a):
        codes[half.part.name] = half.wait()
        half.report(codes[half.part.name])
    if not interrupted and not any(r.interrupted for r in (unit, half_a, half_b, *later)):
        later.insert(0, Running(every["timing"], extra))
    for r in [*later, unit]:
        codes[r.part.name] = r.wait()
        r.report(codes[r.part.name])
    failed = [n for n, c in codes.items() if c != 0]
    failed += [f"{n} (not run: interrupted)" for n in every if n not in codes]
    print(f"== the suite: {'failed: ' + ', '.join(failed) if failed else 'every part passed'}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(run(sys.argv[1:]))
