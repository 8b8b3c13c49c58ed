"""Real components the tests need: outside CI a missing one skips with the fix; in CI it fails.

A test that skips proves nothing, so under ``CI=true`` a missing tool is a failure, never a skip
(``tests/conftest.py`` turns any skip into a failure there as well).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from typing import Any

import pytest


def in_ci() -> bool:
    """CI runs ``make test`` with ``CI=true``."""
    return os.environ.get("CI", "").lower() == "true"


def require_tool(name: str, install: str) -> str:
    """The path of executable ``name``; skip (locally) or fail (CI) with how to install it."""
    path = shutil.which(name)
    if path:
        return path
    message = f"{name} not installed ({install})"
    if in_ci():
        pytest.fail(f"{message}: CI must have every real component")
    pytest.skip(message)


def require(component: str, find: Callable[[], object], missing: type[Exception]) -> None:
    """Skip (locally) or fail (CI) when ``find`` raises ``missing``, with its reason."""
    try:
        find()
    except missing as exc:
        if in_ci():
            pytest.fail(f"CI=true and no {component}: {exc}")
        pytest.skip(str(exc))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[Any]:
    """Under CI=true a skip is a failure: a missing real component must never pass quietly."""
    outcome = yield
    report = outcome.get_result()
    if in_ci() and report.skipped and not hasattr(report, "wasxfail"):
        reason = report.longrepr[-1] if isinstance(report.longrepr, tuple) else report.longrepr
        report.outcome = "failed"
        report.longrepr = f"skipped under CI=true, where nothing may skip: {reason}"
