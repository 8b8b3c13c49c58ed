"""Bad archives with ``--skip-bad``: the file left out with one warning, the rest read.

The refusals themselves (one line naming the file, exit 2, nothing written) are the ``archives``
source of tests/unit/bad_input_cases.py, run by tests/unit/test_bad_inputs.py and published in
docs/configuration.md. ``--skip-bad`` is checked here on the same generated corruptions: exit 0,
one warning naming the file, and the result equal to the archive without that file (run again
with the file removed), apart from the count it reports.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from monitor.cli import main
from tests.unit.report.bad_archives import (
    SLA,
    build_archive,
    corruptions,
)


def run(argv: list[str], capfd: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    try:
        code = main(argv)
    except SystemExit as exc:
        code = int(exc.code or 0)
    out = capfd.readouterr()
    return code, out.out, out.err


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
