"""Maven for the pinned jars: a missing ``mvn`` or a failing build is one line, never a trace."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from runtime.maven import run_mvn

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize(
    ("module", "names"),
    [("testbroker.kafka_jars", "apt-get install maven"), ("streaming.aggregator_jar", "Maven")],
)
def test_a_missing_mvn_is_named_in_one_line(module: str, names: str, tmp_path: Path) -> None:
    env = {
        **os.environ,
        "PATH": str(Path(sys.executable).parent),  # python, and no mvn
        "XDG_CACHE_HOME": str(tmp_path),  # nothing cached
        "PYTHONPATH": str(ROOT),
    }
    env.pop("NINES_KAFKA_CLASSPATH", None)
    env.pop("NINES_AGGREGATOR_JAR", None)
    done = subprocess.run(
        [sys.executable, "-m", module], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and names in lines[0] and "Traceback" not in done.stderr, done.stderr


def test_a_failing_maven_run_gives_its_first_error_line(tmp_path: Path) -> None:
    pom = tmp_path / "pom.xml"
    pom.write_text("<project><modelVersion>4.0.0</modelVersion></project>")  # no coordinates
    why = run_mvn(pom, ["-o", "validate"], 120)
    assert why is not None and "\n" not in why and "ERROR" in why, why
