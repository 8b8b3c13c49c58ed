"""The Prometheus releases the end-to-end and rule tests run on: Debian's 2.42 and 3.x built from
its Go module (``testkit.prometheus3``, in the background of the run; tests/background_builds.py).
A test asks for ``prometheus_release`` and runs once on each; under CI=true a missing one fails.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass

import pytest
from background_builds import PROMETHEUS3_PARAM, built
from real_components import require, require_tool

from testkit.gobuild import GoBuildError
from testkit.prometheus3 import PROMETHEUS3

DEBIAN = "Debian package 'prometheus'; make system-test-deps"


def major_of(binary: str) -> int:
    """The major version ``binary --version`` reports (``prometheus, version 3.16.0 ...``)."""
    out = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=30)
    m = re.search(r"version (\d+)\.", out.stdout + out.stderr)
    if m is None:
        raise AssertionError(f"{binary} --version: no version in {out.stdout + out.stderr!r}")
    return int(m[1])


@dataclass(frozen=True)
class PrometheusRelease:
    """One release's server and promtool."""

    major: int
    server: str
    promtool: str


def debian() -> PrometheusRelease:
    """Debian's Prometheus (2.42 on Debian 12)."""
    server = shutil.which("prometheus") or require_tool("prometheus", DEBIAN)
    promtool = shutil.which("promtool") or require_tool("promtool", DEBIAN)
    return PrometheusRelease(major_of(promtool), server, promtool)


def prometheus3() -> PrometheusRelease:
    """The built Prometheus 3 (skip locally, fail under CI, when the build is not there)."""
    require("Prometheus 3 (testkit.prometheus3)", lambda: built(PROMETHEUS3), GoBuildError)
    where = PROMETHEUS3.bin_dir()
    promtool = str(where / "promtool")
    return PrometheusRelease(major_of(promtool), str(where / "prometheus"), promtool)


@pytest.fixture(params=["2", PROMETHEUS3_PARAM], ids=["prometheus2", "prometheus3"])
def prometheus_release(request: pytest.FixtureRequest) -> PrometheusRelease:
    """Each release in turn: Debian's, then the built 3.x (whose tests run last)."""
    return prometheus3() if request.param == PROMETHEUS3_PARAM else debian()


@pytest.fixture
def every_prometheus() -> list[PrometheusRelease]:
    """Both releases at once, for a test that runs one pipeline under both side by side (it
    runs last, after the 3.x build)."""
    return [debian(), prometheus3()]


__all__ = ["PrometheusRelease", "every_prometheus", "major_of", "prometheus_release"]
