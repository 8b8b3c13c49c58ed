"""Bad archives and output paths through the real CLI: one line naming the file, exit 2.

The cases are generated (tests/unit/report/bad_archives.py); each runs ``monitor.cli.main``
in-process with stderr captured at the file-descriptor level. ``--skip-bad`` is checked on the
same corruptions: exit 0, one warning naming the file, and the result equal to the archive
without that file (run again with the file removed), apart from the count it reports.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from monitor.cli import main
from tests.unit.report.bad_archives import (
    SLA,
    Case,
    build_archive,
    cases,
    corruptions,
    prepare_paths,
    published_cases,
)

CASES = cases()


def run(argv: list[str], capfd: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    try:
        code = main(argv)
    except SystemExit as exc:
        code = int(exc.code or 0)
    out = capfd.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize("case", CASES, ids=[f"{c.command}-{c.description}" for c in CASES])
def test_bad_archive_or_output_is_one_line_exit_2(
    case: Case, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    archive, scratch = tmp_path / "archive", tmp_path / "tmp"
    scratch.mkdir()
    prepare_paths(scratch)
    bad = build_archive(archive)
    reason = case.corruption.damage(bad) if case.corruption else ""
    code, out, err = run(case.argv(archive, scratch), capfd)
    expected = (
        case.expected.replace("{reason}", reason)
        .replace("BAD", str(bad))
        .replace("ARCHIVE", str(archive))
        .replace("TMP", str(scratch))
    )
    assert (code, err) == (2, f"nines {case.command}: error: {expected}\n")
    assert out == ""
    assert not list(scratch.glob("plot*")), "nothing is written on a refusal"


@pytest.mark.parametrize("corruption", corruptions(), ids=lambda c: c.description)
def test_skip_bad_leaves_the_file_out_with_one_warning(
    corruption: object, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    archive = tmp_path / "archive"
    bad = build_archive(archive)
    reason = corruption.damage(bad)  # type: ignore[attr-defined]
    argv = ["slo", "--archive", str(archive), "--sla", SLA]
    code, out, err = run([*argv, "--skip-bad"], capfd)
    assert (code, err) == (0, f"nines slo: warning: archive: skipped {bad}: {reason}\n")
    note = "1 bad archive file skipped, their windows left out\n"
    assert out.endswith(note)
    bad.unlink()
    code, without, err = run(argv, capfd)
    assert (code, err) == (0, "")
    assert out.removesuffix(note) == without
    assert "NO" in without or "yes" in without  # the good files were read and judged


def test_report_skip_bad_plots_the_good_files_and_says_so(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    archive = tmp_path / "archive"
    bad = build_archive(archive)
    reason = corruptions()[4].damage(bad)  # truncated at 1/2
    whole = tmp_path / "whole"
    shutil.copytree(archive, whole)
    code, out, err = run(
        ["report", "--archive", str(archive), "--out", str(tmp_path / "p.png"), "--skip-bad"],
        capfd,
    )
    assert (code, err) == (0, f"nines report: warning: archive: skipped {bad}: {reason}\n")
    assert out.endswith("from 12 windows; 1 bad archive file skipped, their windows left out)\n")
    assert (tmp_path / "p.png").stat().st_size > 0


def test_the_cases_are_many_and_published_as_rows() -> None:
    rows = published_cases()
    assert len(rows) == len(CASES) >= 100
    for command, flags, description, expected in rows:
        assert command in ("report", "slo") and flags and description
        assert "{reason}" not in expected and "\n" not in expected
    assert len({(r[0], r[2]) for r in rows}) == len(rows), "descriptions are unique per command"
