"""Fixtures that run rendered rules through the real ``promtool``."""

from __future__ import annotations

import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml
from alerts_helpers import EXAMPLE_SLA, RunTests
from prometheus_releases import PrometheusRelease

from core.sla import SlaConfig
from runtime.config_io import load_sla


@pytest.fixture
def promtool(prometheus_release: PrometheusRelease) -> str:
    """Path of promtool of each release in turn (Debian's 2.42, the built 3.x): these tests
    prove the rules with the real tool only, of the versions users run."""
    return prometheus_release.promtool


@pytest.fixture(scope="session")
def example_sla() -> SlaConfig:
    """The SLA shipped in examples/sla.yaml."""
    return load_sla(EXAMPLE_SLA)


@pytest.fixture
def run_rule_tests(promtool: str, tmp_path: Path) -> RunTests:
    """Write rules + a promtool unit-test file and run ``promtool test rules``; fail on failure."""

    def run(
        rules: Mapping[str, Any],
        tests: Sequence[Mapping[str, Any]],
        *,
        evaluation_interval: str = "1m",
    ) -> str:
        (tmp_path / "rules.yaml").write_text(yaml.safe_dump(dict(rules), sort_keys=False))
        document = {
            "rule_files": ["rules.yaml"],
            "evaluation_interval": evaluation_interval,
            "tests": list(tests),
        }
        (tmp_path / "tests.yaml").write_text(yaml.safe_dump(document, sort_keys=False))
        out = subprocess.run(
            [promtool, "test", "rules", "tests.yaml"],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert out.returncode == 0, out.stdout + out.stderr
        return out.stdout

    return run
