"""Binaries the test run builds in the background (``testkit.gobuild``): the Kubernetes control
plane of the chart's tests and Prometheus 3 of the end-to-end tests.

At collection a missing build starts at nice 19 and the tests that need it move to the end of
the run. Before the first of them, the wait for the build is a step of its own: pytest-timeout
counts fixture setup against the test, so a wait inside a fixture turned a build still running
into a timeout of every test that needed it. Bounded by ``BUILD_TIMEOUT_S``; its outcome is kept
and the fixture that needs the binaries reports a failure in one line.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from testkit.gobuild import (
    BUILD_TIMEOUT_S,
    GoBuildError,
    GoTools,
    building,
    start_background,
    stop_background,
    wait_background,
)
from testkit.prometheus3 import PROMETHEUS3
from testkube.build import KUBE

TESTS = Path(__file__).resolve().parent
K8S_TESTS = TESTS / "k8s"
#: The parameter of ``prometheus_release`` that asks for the built Prometheus 3.
PROMETHEUS3_PARAM = "3"
#: Each build's outcome, once waited for (None: built).
_outcome: dict[str, GoBuildError | None] = {}


def needs(item: pytest.Item) -> GoTools | None:
    """The built binaries a test needs, if any."""
    if item.path.is_relative_to(K8S_TESTS):
        return KUBE
    callspec = getattr(item, "callspec", None)
    if callspec is not None and callspec.params.get("prometheus_release") == PROMETHEUS3_PARAM:
        return PROMETHEUS3
    if "every_prometheus" in getattr(item, "fixturenames", ()):
        return PROMETHEUS3
    return None


def order_and_start(items: list[pytest.Item]) -> list[str]:
    """Move the tests that need a build to the end (Prometheus 3's, then the chart's) and start
    each build that is missing; the names of those started."""
    wanted = {id(item): needs(item) for item in items}
    rest = [item for item in items if wanted[id(item)] is None]
    later = [item for t in (PROMETHEUS3, KUBE) for item in items if wanted[id(item)] is t]
    items[:] = rest + later
    started = []
    for tools in (KUBE, PROMETHEUS3):
        if any(wanted[id(item)] is tools for item in later):
            log = tools.bin_dir().parent / "build.log"
            log.parent.mkdir(parents=True, exist_ok=True)
            if start_background(tools, log):
                started.append(f"{tools.name} (log: {log})")
    return started


def wait_before(item: pytest.Item) -> None:
    """Before the first test that needs a build: wait for it, once, and keep the outcome."""
    tools = needs(item)
    if tools is None or tools.name in _outcome:
        return
    reporter = item.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None and building(tools):
        reporter.write_line(
            f"\nwaiting for the {tools.name} build (at most {BUILD_TIMEOUT_S:.0f} s)"
        )
    try:
        wait_background(tools, BUILD_TIMEOUT_S)
        _outcome[tools.name] = None
    except GoBuildError as exc:
        _outcome[tools.name] = exc


def built(tools: GoTools) -> Path:
    """The built binaries' directory; GoBuildError if the build failed or is not there."""
    failed = _outcome.get(tools.name)
    if failed is not None:
        raise failed
    if tools.missing():
        raise GoBuildError(
            f"{tools.name} not built: {', '.join(tools.missing())} (python -m {tools.main_module})"
        )
    return tools.bin_dir()


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """The wait, outside pytest-timeout's timer (this wrapper runs first)."""
    wait_before(item)
    yield


__all__ = ["built", "needs", "order_and_start", "pytest_runtest_protocol", "stop_background"]
