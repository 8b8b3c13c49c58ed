"""The control plane's binaries: built once from the pinned Go modules, then cached by version.

``testkube/go/go.mod`` pins one ``k8s.io/kubernetes`` release (each ``k8s.io/*`` staging module
replaced by its matching ``v0.Y.Z``) and ``sigs.k8s.io/kwok``; its go.sum pins their bytes.
``go build`` fetches them through the Go module proxy once (into Go's own module cache) and
writes kube-apiserver, kube-controller-manager, kube-scheduler and kwok into
``$XDG_CACHE_HOME/nines/kube/<version>-<go.mod hash>/``; a later run finds them there and
builds nothing (``testkit.gobuild``). etcd is Debian's ``etcd-server`` (``make system-test-deps``).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from testkit import gobuild
from testkit.gobuild import BUILD_TIMEOUT_S
from testkit.gobuild import GoBuildError as KubeBuildError

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


def _ldflags(tools: gobuild.GoTools, binary: str) -> str:
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


def _write_kwok_stages(go: str, target: Path) -> None:
    """kwok's stage files, from its module as go.sum pins it, into one multi-document file."""
    done = subprocess.run(
        [go, "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/kwok"],
        cwd=GO_MODULE, env=KUBE.go_env(), capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    root = Path(done.stdout.strip())
    if done.returncode != 0 or not root.is_dir():
        raise KubeBuildError(f"go list sigs.k8s.io/kwok failed: {done.stderr.strip()[-300:]}")
    text = "\n---\n".join((root / name).read_text() for name in KWOK_STAGES)
    tmp = target / f".{KWOK_STAGES_FILE}.{os.getpid()}.tmp"
    tmp.write_text(text)
    os.replace(tmp, target / KWOK_STAGES_FILE)


KUBE = gobuild.GoTools(
    name="kube",
    module_dir=GO_MODULE,
    binaries=BINARIES,
    version_module="k8s.io/kubernetes",
    ldflags=_ldflags,
    main_module="testkube.build",
    extra={KWOK_STAGES_FILE: _write_kwok_stages},
)


def kube_version() -> str:
    """The Kubernetes release go.mod pins (``v1.Y.Z``)."""
    return KUBE.pinned("k8s.io/kubernetes")


def kwok_version() -> str:
    """The kwok release go.mod pins."""
    return KUBE.pinned("sigs.k8s.io/kwok")


def bin_dir() -> Path:
    """Where the binaries are kept: named by the Kubernetes version and go.mod/go.sum's hash."""
    return KUBE.bin_dir()


def missing() -> list[str]:
    """The binaries (and kwok's stage file) not yet in the cache."""
    return KUBE.missing()


def build(log: bool = True) -> Path:
    """The cached binaries' directory; any one missing is built first."""
    return KUBE.build(log)


def start_background(log: Path) -> bool:
    """Start the build in the background when something is missing; True if it started."""
    return gobuild.start_background(KUBE, log)


def building() -> bool:
    """True while a background build this run started is still running."""
    return gobuild.building(KUBE)


def wait_background(timeout_s: float = BUILD_TIMEOUT_S) -> None:
    """Wait for the background build, if one was started (KubeBuildError if it failed or ran
    past ``timeout_s``)."""
    gobuild.wait_background(KUBE, timeout_s)


def main() -> int:
    """``python -m testkube.build``: build what is missing (``make kube-bins``), print the cache."""
    return gobuild.main(KUBE, lambda: f"Kubernetes {kube_version()}, kwok {kwok_version()}")


__all__ = [
    "BUILD_TIMEOUT_S",
    "KUBE",
    "KubeBuildError",
    "bin_dir",
    "build",
    "building",
    "kube_version",
    "kwok_version",
    "missing",
    "start_background",
    "wait_background",
]

if __name__ == "__main__":
    raise SystemExit(main())
