"""The repository holds source, never machine state: a fresh clone must build on any machine."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]

#: Path components that mark machine state: virtualenvs and tool caches.
MACHINE_STATE = {
    ".venv",
    "venv",
    "__pycache__",
    ".pytest_cache",
    ".mypy_cache",
    ".ruff_cache",
    ".hypothesis",
    "spark-warehouse",
    "metastore_db",
    ".eggs",
}


def tracked() -> list[tuple[str, str]]:
    """(git mode, path) of every tracked file, from the index."""
    out = subprocess.run(
        ["git", "ls-files", "-s", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.decode()
    entries = []
    for item in filter(None, out.split("\0")):
        meta, path = item.split("\t", 1)
        entries.append((meta.split()[0], path))
    return entries


def machine_state_problems(entries: list[tuple[str, str]], root: Path) -> list[str]:
    """Every tracked path that is a symlink leaving the repository, a virtualenv or a cache."""
    problems = []
    for mode, path in entries:
        parts = Path(path).parts
        if MACHINE_STATE & set(parts) or any(p.endswith(".egg-info") for p in parts):
            problems.append(f"{path}: a virtualenv or cache")
        elif Path(path).name == "pyvenv.cfg":
            problems.append(f"{path}: a virtualenv")
        elif mode == "120000":
            target = os.readlink(root / path) if (root / path).is_symlink() else ""
            resolved = (root / Path(path).parent / target).resolve()
            if not target or os.path.isabs(target) or not resolved.is_relative_to(root):
                problems.append(f"{path}: a symlink leaving the repository ({target or '?'})")
    return problems


def test_no_machine_state_is_tracked() -> None:
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    assert machine_state_problems(tracked(), ROOT) == []


def test_the_check_catches_a_venv_link_and_caches(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / ".venv").symlink_to("/tmp/setup/venv")
    (tmp_path / "inside").symlink_to("src")
    entries = [
        ("120000", ".venv"),
        ("120000", "inside"),
        ("100644", "monitor/__pycache__/cli.cpython-311.pyc"),
        ("100644", "env/pyvenv.cfg"),
        ("100644", "nines.egg-info/PKG-INFO"),
        ("100644", "monitor/cli.py"),
    ]
    problems = machine_state_problems(entries, tmp_path)
    assert problems == [
        ".venv: a virtualenv or cache",
        "monitor/__pycache__/cli.cpython-311.pyc: a virtualenv or cache",
        "env/pyvenv.cfg: a virtualenv",
        "nines.egg-info/PKG-INFO: a virtualenv or cache",
    ]
    entries = [("120000", "away")]
    (tmp_path / "away").symlink_to("../elsewhere")
    assert machine_state_problems(entries, tmp_path) == [
        "away: a symlink leaving the repository (../elsewhere)"
    ]
