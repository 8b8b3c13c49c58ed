"""Test binaries built once from pinned Go modules, cached by version, built in the background.

A ``GoTools`` names a directory holding a ``go.mod`` (what to build, pinned) and its ``go.sum``
(the bytes), the binaries and the Go package each is built from. ``go build`` fetches the modules
through the Go module proxy once (into Go's own module cache) and writes the binaries into
``$XDG_CACHE_HOME/nines/<name>/<version>-<go.mod and go.sum hash>/``; a later run finds them
there and builds nothing. The test run starts a missing build at collection, in a process of its
own at nice 19, and the tests that need it run last and wait for it (``tests/conftest.py``).
Used for the Kubernetes control plane (``testkube.build``) and Prometheus 3
(``testkit.prometheus3``).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from runtime.maven import cache_dir
from testkit.niceness import lower_priority

#: A cold build on 2 shared cores at one job took 14 min (Kubernetes) and 11 min (Prometheus);
#: a busy machine takes longer.
BUILD_TIMEOUT_S = 3600.0


class GoBuildError(RuntimeError):
    """Go is missing or a build failed; the message says which, once."""


@dataclass(frozen=True)
class GoTools:
    """Binaries built from one pinned Go module directory."""

    #: The cache's subdirectory and the name errors use (``kube``, ``prometheus3``).
    name: str
    module_dir: Path
    #: Binary name → the Go package it is built from.
    binaries: dict[str, str]
    #: The module whose pinned version names the cache directory.
    version_module: str
    #: ``-ldflags`` for a binary (its version stamp), given the tools and the binary's name.
    ldflags: Callable[[GoTools, str], str] = lambda tools, binary: "-s -w"
    #: The module ``python -m`` runs to build them (``make`` targets call it too).
    main_module: str = ""
    #: Files written beside the binaries by ``extra`` (name → writer(go, target directory)).
    extra: dict[str, Callable[[str, Path], None]] = field(default_factory=dict)

    def pinned(self, module: str) -> str:
        """The version go.mod requires of ``module``."""
        text = (self.module_dir / "go.mod").read_text()
        match = re.search(rf"^\s*(?:require\s+)?{re.escape(module)} (v\S+)", text, re.M)
        if match is None:
            raise GoBuildError(f"{self.module_dir / 'go.mod'} does not require {module}")
        return match.group(1)

    def version(self) -> str:
        """The pinned version of ``version_module``."""
        return self.pinned(self.version_module)

    def bin_dir(self) -> Path:
        """Where the binaries are kept: named by the version and go.mod/go.sum's hash."""
        digest = hashlib.sha1()
        for name in ("go.mod", "go.sum"):
            digest.update((self.module_dir / name).read_bytes())
        return cache_dir() / self.name / f"{self.version()}-{digest.hexdigest()[:12]}"

    def missing(self) -> list[str]:
        """The binaries (and extra files) not yet in the cache."""
        wanted = [*self.binaries, *self.extra]
        return [n for n in wanted if not (self.bin_dir() / n).is_file()]

    def go_env(self) -> dict[str, str]:
        """Go's environment for these builds: static, read-only modules, no VCS stamp."""
        flags = "-mod=readonly -trimpath -buildvcs=false"
        return {**os.environ, "CGO_ENABLED": "0", "GOFLAGS": flags}

    def build(self, log: bool = True) -> Path:
        """The cached binaries' directory; any one missing is built first (niced, one at a
        time)."""
        target = self.bin_dir()
        todo = self.missing()
        if not todo:
            return target
        go = shutil.which("go")
        if go is None:
            raise GoBuildError(f"{self.name} is built with Go (>= 1.26): install it")
        target.mkdir(parents=True, exist_ok=True)
        for name in todo:
            if name in self.extra:
                self.extra[name](go, target)
                continue
            tmp = target / f".{name}.{os.getpid()}.tmp"
            argv = ["nice", "-n", "10", go, "build", "-ldflags", self.ldflags(self, name)]
            started = time.monotonic()
            try:
                done = subprocess.run(
                    [*argv, "-o", str(tmp), self.binaries[name]],
                    cwd=self.module_dir,
                    env=self.go_env(),
                    capture_output=True,
                    text=True,
                    timeout=BUILD_TIMEOUT_S,
                    check=False,
                )
            except subprocess.TimeoutExpired:
                why = f"go build {name} did not finish within {BUILD_TIMEOUT_S:.0f} s"
                raise GoBuildError(why) from None
            if done.returncode != 0:
                lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
                raise GoBuildError(f"go build {name} failed: {lines[-1] if lines else 'no output'}")
            os.replace(tmp, target / name)
            if log:
                print(f"built {name} in {time.monotonic() - started:.0f} s", file=sys.stderr)
        return target


class BackgroundBuild:
    """``python -m <tools.main_module>`` in its own process and session at nice 19 (the
    session's autogroup too: ``testkit.niceness``), its output to ``log``:
    the test run starts it when the tests that need it are collected and the cache misses, runs
    them last, and waits for it there. At nice 19 the build gets a core only when the tests
    leave one idle (their timing-sensitive processes run at 0)."""

    def __init__(self, tools: GoTools, log: Path) -> None:
        self.tools, self.log = tools, log
        with log.open("wb") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", tools.main_module],
                stdout=out,
                stderr=subprocess.STDOUT,
                preexec_fn=lower_priority(19),  # its session's group too (niceness.py)
                start_new_session=True,
            )

    def running(self) -> bool:
        """True while the build runs."""
        return self.proc.poll() is None

    def wait(self, timeout_s: float = BUILD_TIMEOUT_S) -> None:
        """Until the build ends; GoBuildError naming its last line if it failed."""
        try:
            code = self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            raise GoBuildError(
                f"the {self.tools.name} build ran past {timeout_s:.0f} s (log: {self.log})"
            ) from None
        if code != 0:
            lines = self.log.read_text(errors="replace").strip().splitlines()
            last = lines[-1] if lines else f"exit {code}"
            raise GoBuildError(f"the {self.tools.name} build failed: {last} (log: {self.log})")

    def stop(self) -> None:
        """End the build (the run is over before the tests that wanted it)."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(30)


#: The test run's background builds, by tools name.
_background: dict[str, BackgroundBuild] = {}


def start_background(tools: GoTools, log: Path) -> bool:
    """Start the build in the background when something is missing and Go is there; True if
    it started."""
    if tools.name in _background or not tools.missing() or shutil.which("go") is None:
        return False
    _background[tools.name] = BackgroundBuild(tools, log)
    return True


def building(tools: GoTools) -> bool:
    """True while a background build this run started for ``tools`` is still running."""
    build = _background.get(tools.name)
    return build is not None and build.running()


def wait_background(tools: GoTools, timeout_s: float = BUILD_TIMEOUT_S) -> None:
    """Wait for ``tools``' background build, if one was started (GoBuildError if it failed or
    ran past ``timeout_s``)."""
    build = _background.get(tools.name)
    if build is not None:
        build.wait(timeout_s)


def stop_background() -> None:
    """Stop every background build still running."""
    for build in _background.values():
        build.stop()


def main(tools: GoTools, describe: Callable[[], str]) -> int:
    """``python -m <main_module>``: build what is missing, print the cache."""
    started = time.monotonic()
    try:
        where = tools.build()
    except GoBuildError as exc:
        print(f"nines: error: {exc}", file=sys.stderr)
        return 2
    print(f"{describe()}: {where} ({time.monotonic() - started:.1f} s)")
    return 0
