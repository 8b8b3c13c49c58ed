"""The probe's summary file: the defined format another process reads, never a log line."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from core.config import ConfigError
from probes.summary import FIELDS, FORMAT, check_writable, read_summary, write_summary

totals_st = st.fixed_dictionaries({k: st.integers(0, 2**63 - 1) for k in FIELDS})


@given(totals_st)
def test_what_is_written_is_read_back(totals: dict[str, int]) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "summary.json"
        write_summary(path, totals)
        assert read_summary(path) == totals
        assert json.loads(path.read_text())["format"] == FORMAT
        assert os.listdir(tmp) == ["summary.json"]  # the temporary file was renamed over it


def test_a_rewrite_replaces_the_file_whole(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    write_summary(path, dict.fromkeys(FIELDS, 1))
    write_summary(path, dict.fromkeys(FIELDS, 2))
    assert read_summary(path) == dict.fromkeys(FIELDS, 2)


def test_no_file_is_no_clean_stop_and_another_format_is_refused(tmp_path: Path) -> None:
    assert read_summary(tmp_path / "none.json") == {}
    (tmp_path / "old.json").write_text(json.dumps({"format": 99, **dict.fromkeys(FIELDS, 0)}))
    with pytest.raises(ValueError, match="format 1"):
        read_summary(tmp_path / "old.json")


def test_a_file_that_cannot_be_written_is_refused_before_probing(tmp_path: Path) -> None:
    check_writable(None)
    check_writable(str(tmp_path / "s.json"))
    with pytest.raises(ConfigError, match=r"^probe\.summary_file: cannot write .*/no/s\.json"):
        check_writable(str(tmp_path / "no" / "s.json"))
