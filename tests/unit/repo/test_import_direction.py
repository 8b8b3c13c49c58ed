"""Data walks forward: each package imports only the packages before it in the pipeline.

core is the floor (pure: no Kafka, Spark or Prometheus library, no stage); the stages hand data
forward (probes → Kafka → streaming → closed windows → monitor); monitor composes them at the top.
runtime (the host's I/O: config files and secrets, the /metrics server, Maven) sits on core and
serves every stage; kafkautil (Kafka client helpers on top of core) every stage that talks to Kafka.
testkit (what tests/ and bench/ share) may import the product; no product package imports it,
and neither the wheel nor the image ships it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]

#: Package → the first-party packages it may import.
ALLOWED: dict[str, set[str]] = {
    "core": set(),
    # the host's I/O a running stage needs: config files and secrets, /metrics, Maven
    "runtime": {"core"},
    "testbroker": {"core", "runtime"},
    # Kafka client helpers every stage may share (topic metadata), so no stage imports another.
    "kafkautil": {"core"},
    "probes": {"core", "runtime", "kafkautil"},
    "streaming": {"core", "runtime", "kafkautil"},
    # the dashboards' CLI reads its token file through runtime's bounded reader
    "dashboards": {"core", "runtime"},
    "monitor": {"core", "runtime", "kafkautil", "probes", "streaming", "testbroker", "dashboards"},
}
#: Test and bench support: above the product, never imported by it, never shipped.
SUPPORT = "testkit"
#: Test-only packages beside it (the chart tests' control plane), never shipped either.
TEST_ONLY = ("testkube",)
#: Third-party libraries the pure core must never import (I/O and engines live in the stages).
CORE_FORBIDDEN = {"confluent_kafka", "pyspark", "prometheus_client", "pyarrow", "requests"}


def imports(path: Path) -> set[str]:
    """Top-level module names imported anywhere in the file, lazily imported ones included."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def violations(root: Path) -> list[str]:
    out = []
    for package, allowed in ALLOWED.items():
        for path in sorted((root / package).rglob("*.py")):
            rel = path.relative_to(root)
            for name in sorted(imports(path)):
                if name in ALLOWED and name != package and name not in allowed:
                    out.append(f"{rel}: imports {name}")
                if name == SUPPORT:
                    out.append(f"{rel}: imports the test support {SUPPORT}")
                if package == "core" and name in CORE_FORBIDDEN:
                    out.append(f"{rel}: the core imports {name}")
    return out


#: The core may not reach the environment, the network or other processes: that I/O lives in
#: ``runtime`` (config files and secrets, /metrics, Maven).
PURE = {p.relative_to(ROOT).as_posix() for p in (ROOT / "core").glob("*.py")}
IO_MODULES = {"os", "socket", "subprocess", "yaml", "shutil", "tempfile", "urllib", "http"}


#: Modules of those packages that are pure string functions (percent-encoding).
PURE_SUBMODULES = {"urllib.parse"}


def dotted_imports(path: Path) -> set[str]:
    """Full module names imported anywhere in the file (``urllib.parse``, not ``urllib``)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
    return names


def io_imports(path: Path) -> list[str]:
    """The I/O modules ``path`` imports."""
    return sorted(
        n
        for n in dotted_imports(path)
        if n.split(".")[0] in IO_MODULES and n not in PURE_SUBMODULES
    )


def test_the_pure_core_modules_do_no_io() -> None:
    found = {rel: io_imports(ROOT / rel) for rel in sorted(PURE)}
    assert {rel: names for rel, names in found.items() if names} == {}


def test_every_import_walks_forward() -> None:
    assert violations(ROOT) == []


def test_the_check_catches_an_upward_and_a_sideways_import(tmp_path: Path) -> None:
    for package in ALLOWED:
        (tmp_path / package).mkdir()
    (tmp_path / "core" / "bad.py").write_text("import pyspark\nfrom monitor import exporter\n")
    (tmp_path / "streaming" / "job.py").write_text("def f():\n    from monitor.x import y\n")
    (tmp_path / "probes" / "ok.py").write_text("from core.echo import Echo\nimport numpy\n")
    (tmp_path / "streaming" / "side.py").write_text("from probes import agent\n")
    (tmp_path / "monitor" / "demo.py").write_text("def f():\n    import testkit.naive\n")
    assert violations(tmp_path) == [
        "core/bad.py: imports monitor",
        "core/bad.py: the core imports pyspark",
        "streaming/job.py: imports monitor",
        "streaming/side.py: imports probes",
        "monitor/demo.py: imports the test support testkit",
    ]


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_every_package_exists(package: str) -> None:
    assert (ROOT / package / "__init__.py").is_file()


def test_the_image_and_the_wheel_ship_every_package() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    pyproject = (ROOT / "pyproject.toml").read_text()
    for package in ALLOWED:
        assert f"COPY {package} {package}" in dockerfile, package
        assert f'"{package}*"' in pyproject, package
    for package in (SUPPORT, *TEST_ONLY):
        assert f"COPY {package}" not in dockerfile and f'"{package}*"' not in pyproject, package
        assert f'"{package}" = ' not in pyproject, package  # nor its package data


def test_the_support_package_is_what_tests_and_benches_import() -> None:
    assert (ROOT / SUPPORT / "__init__.py").is_file()
    users = {
        top
        for top in ("tests", "bench")
        for path in (ROOT / top).rglob("*.py")
        if SUPPORT in imports(path)
    }
    assert users == {"tests", "bench"}
