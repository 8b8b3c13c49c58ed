"""A report's default resolution is the archive's finest, as the stream job's WindowSpec says."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.config import ConfigError
from monitor.report.load import finest_resolution


def archive(tmp_path: Path, *names: str) -> Path:
    for name in names:
        (tmp_path / f"resolution={name}").mkdir()
    (tmp_path / "resolution=soon").mkdir()  # not ours: left out
    return tmp_path


def test_the_finest_is_the_specs_whatever_the_order(tmp_path: Path) -> None:
    assert finest_resolution(archive(tmp_path, "1h", "1m", "10s")) == "10s"


def test_resolutions_no_spec_allows_are_named_in_one_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"^archive: resolutions 15s,40s under .*--resolution$"):
        finest_resolution(archive(tmp_path, "15s", "40s"))


def test_an_archive_without_windows_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no windows"):
        finest_resolution(archive(tmp_path))
