"""The control plane's binaries: built once from the pinned Go modules, then cached by version.

``testkube/go/go.mod`` pins one ``k8s.io/kubernetes`` release (each ``k8s.io/*`` staging module
replaced by its matching ``v0.Y.Z``) and ``sigs.k8s.io/kwok``; its go.sum pins their bytes.
``go build`` fetches them through the Go module proxy once (into Go's own module cache) and
writes kube-apiserver, kube-controller-manager, kube-scheduler and kwok into
``$XDG_CACHE_HOME/nines/kube/<version>-<go.mod hash>/``; a later run finds them there and
builds nothing. etcd is Debian's ``etcd-server`` (``make system-test-deps``).
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
from pathlib import Path

from runtime.maven import cache_dir

GO_MODULE = Path(__file__).resolve().parent / "go"
#: The binaries the tests run, by the Go package each is built from.
BINARIES = {
    "kube-apiserver": "k8s.io/kubernetes/cmd/kube-apiserver",
    "kube-controller-manager": "k8s.io/kubernetes/cmd/kube-controller-manager",
    "kube-scheduler": "k8s.io/kubernetes/cmd/kube-scheduler",
    "kwok": "sigs.k8s.io/kwok/cmd/kwok",
}
#: kwok's own stage files (node-initialize, heartbeat with lease, pod ready/complete/delete), as
#: ``kwokctl`` configures it by default; copied beside the binaries into one ``--config`` file.
KWOK_STAGES = (
    "kustomize/stage/node/fast/node-initialize.yaml",
    "kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
    "kustomize/stage/pod/fast/pod-ready.yaml",
    "kustomize/stage/pod/fast/pod-complete.yaml",
    "kustomize/stage/pod/fast/pod-delete.yaml",
)
KWOK_STAGES_FILE = "kwok-stages.yaml"
#: One cold build measured 14 min at one job on 2 cores; a busy machine takes longer.
BUILD_TIMEOUT_S = 3600.0


class KubeBuildError(RuntimeError):
    """Go is missing or a build failed; the message says which, once."""


def _pinned(module: str) -> str:
    """The version go.mod requires of ``module``."""
    match = re.search(rf"^\s*{re.escape(module)} (v\S+)", (GO_MODULE / "go.mod").read_text(), re.M)
    if match is None:
        raise KubeBuildError(f"testkube/go/go.mod does not require {module}")
    return match.group(1)


def kube_version() -> str:
    """The Kubernetes release go.mod pins (``v1.Y.Z``)."""
    return _pinned("k8s.io/kubernetes")


def kwok_version() -> str:
    """The kwok release go.mod pins."""
    return _pinned("sigs.k8s.io/kwok")


def bin_dir() -> Path:
    """Where the binaries are kept: named by the Kubernetes version and go.mod/go.sum's hash."""
    digest = hashlib.sha1()
    for name in ("go.mod", "go.sum"):
        digest.update((GO_MODULE / name).read_bytes())
    return cache_dir() / "kube" / f"{kube_version()}-{digest.hexdigest()[:12]}"


def _ldflags(binary: str) -> str:
    """Stamp the release into the binary, or the server reports v0.0.0 (and kwok its own)."""
    if binary == "kwok":
        return f"-s -w -X sigs.k8s.io/kwok/pkg/consts.Version={kwok_version().lstrip('v')}"
    version = kube_version()
    major, minor = version.lstrip("v").split(".")[:2]
    pkg = "k8s.io/component-base/version"
    return (
        f"-s -w -X {pkg}.gitVersion={version} -X {pkg}.gitMajor={major} -X {pkg}.gitMinor={minor}"
        f" -X {pkg}.gitTreeState=clean -X {pkg}.buildDate=1970-01-01T00:00:00Z"
    )


def missing() -> list[str]:
    """The binaries (and kwok's stage file) not yet in the cache."""
    return [name for name in [*BINARIES, KWOK_STAGES_FILE] if not (bin_dir() / name).is_file()]


def _go_env() -> dict[str, str]:
    return {**os.environ, "CGO_ENABLED": "0", "GOFLAGS": "-mod=readonly -trimpath -buildvcs=false"}


def _write_kwok_stages(go: str, target: Path) -> None:
    """kwok's stage files, from its module as go.sum pins it, into one multi-document file."""
    done = subprocess.run(
        [go, "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/kwok"],
        cwd=GO_MODULE, env=_go_env(), capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    root = Path(done.stdout.strip())
    if done.returncode != 0 or not root.is_dir():
        raise KubeBuildError(f"go list sigs.k8s.io/kwok failed: {done.stderr.strip()[-300:]}")
    text = "\n---\n".join((root / name).read_text() for name in KWOK_STAGES)
    tmp = target / f".{KWOK_STAGES_FILE}.{os.getpid()}.tmp"
    tmp.write_text(text)
    os.replace(tmp, target / KWOK_STAGES_FILE)


def build(log: bool = True) -> Path:
    """The cached binaries' directory; any one missing is built first (niced, one at a time)."""
    target = bin_dir()
    todo = missing()
    if not todo:
        return target
    go = shutil.which("go")
    if go is None:
        raise KubeBuildError("the control plane is built with Go (>= 1.26): install it")
    target.mkdir(parents=True, exist_ok=True)
    env = _go_env()
    for name in todo:
        if name == KWOK_STAGES_FILE:
            _write_kwok_stages(go, target)
            continue
        tmp = target / f".{name}.{os.getpid()}.tmp"
        argv = ["nice", "-n", "10", go, "build", "-ldflags", _ldflags(name), "-o", str(tmp)]
        started = time.monotonic()
        try:
            done = subprocess.run(
                [*argv, BINARIES[name]],
                cwd=GO_MODULE,
                env=env,
                capture_output=True,
                text=True,
                timeout=BUILD_TIMEOUT_S,
                check=False,
            )
        except subprocess.TimeoutExpired:
            why = f"go build {name} did not finish within {BUILD_TIMEOUT_S:.0f} s"
            raise KubeBuildError(why) from None
        if done.returncode != 0:
            lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
            raise KubeBuildError(f"go build {name} failed: {lines[-1] if lines else 'no output'}")
        os.replace(tmp, target / name)
        if log:
            print(f"built {name} in {time.monotonic() - started:.0f} s", file=sys.stderr)
    return target


class BackgroundBuild:
    """``python -m testkube.build`` in its own process at nice 19, its output to ``log``: the test
    run starts it when the chart's install tests are collected and the cache misses, runs them
    last, and waits for it there. On a fresh 2-core machine the build takes 14-20 min; the rest
    of the suite runs meanwhile, and at nice 19 the build gets a core only when the tests leave
    one idle (their timing-sensitive processes run at 0)."""

    def __init__(self, log: Path) -> None:
        self.log = log
        with log.open("wb") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "testkube.build"],
                stdout=out,
                stderr=subprocess.STDOUT,
                preexec_fn=lambda: os.nice(19),
                start_new_session=True,
            )

    def wait(self, timeout_s: float = BUILD_TIMEOUT_S) -> None:
        """Until the build ends; KubeBuildError naming its last line if it failed."""
        try:
            code = self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            raise KubeBuildError(f"the control plane's build ran past {timeout_s:.0f} s") from None
        if code != 0:
            lines = self.log.read_text(errors="replace").strip().splitlines()
            last = lines[-1] if lines else f"exit {code}"
            raise KubeBuildError(f"the control plane's build failed: {last}")

    def stop(self) -> None:
        """End the build (the run is over before the tests that wanted it)."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(30)


#: The test run's background build, if it started one (``start_background``).
_background: list[BackgroundBuild] = []


def start_background(log: Path) -> bool:
    """Start the build in the background when something is missing and Go is there; True if
    it started."""
    if _background or not missing() or shutil.which("go") is None:
        return False
    _background.append(BackgroundBuild(log))
    return True


def building() -> bool:
    """True while a background build this run started is still running."""
    return bool(_background) and _background[0].proc.poll() is None


def wait_background(timeout_s: float = BUILD_TIMEOUT_S) -> None:
    """Wait for the background build, if one was started (KubeBuildError if it failed or ran
    past ``timeout_s``)."""
    if _background:
        _background[0].wait(timeout_s)


def stop_background() -> None:
    """Stop the background build, if one is still running."""
    if _background:
        _background[0].stop()


def main() -> int:
    """``python -m testkube.build``: build what is missing (``make kube-bins``), print the cache."""
    started = time.monotonic()
    try:
        where = build()
    except KubeBuildError as exc:
        print(f"nines: error: {exc}", file=sys.stderr)
        return 2
    took_s = time.monotonic() - started
    print(f"Kubernetes {kube_version()}, kwok {kwok_version()}: {where} ({took_s:.1f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
