"""``make test`` runs the suite in parts (``testkit.suite``): every test file runs in exactly one
of them, so a new file can be neither forgotten nor run twice."""

from __future__ import annotations

from pathlib import Path

from testkit.suite import ROOT, Part, parts, timing_files


def runs(part: Part, test_file: Path) -> bool:
    """True if ``part``'s pytest collects ``test_file`` (under a path, under no ignore)."""
    rel = test_file.relative_to(ROOT)

    def under(paths: tuple[str, ...]) -> bool:
        return any(rel == Path(p) or Path(p) in rel.parents for p in paths)

    return under(part.paths) and not under(part.ignore)


def test_every_test_file_runs_in_exactly_one_part() -> None:
    bench = ROOT / "tests" / "bench"  # `make bench`'s, deselected by `-m 'not bench'`
    files = [f for f in (ROOT / "tests").rglob("test_*.py") if bench not in f.parents]
    assert len(files) > 100
    where = {f.relative_to(ROOT): [n for n, p in parts().items() if runs(p, f)] for f in files}
    wrong = {str(f): names for f, names in where.items() if len(names) != 1}
    assert not wrong, f"test files in no part or in more than one (testkit/suite.py): {wrong}"


def test_the_timing_set_runs_alone_and_exists() -> None:
    timing = timing_files()
    assert parts()["timing"].paths == timing and all((ROOT / f).is_file() for f in timing)
    assert parts()["timing"].nice == 0 and parts()["timing"].log is None
