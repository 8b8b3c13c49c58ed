"""``nines compare``'s pure parts: the case syntax."""

from __future__ import annotations

import pytest

from core.config import ConfigError
from monitor.compare import Case


def test_cases_parse_sizes_and_rates_and_refuse_the_rest() -> None:
    assert Case.parse("1KiB@3000") == Case(1024, 3000.0)
    assert Case.parse("256B@20000").key == "256B-20000"
    with pytest.raises(ConfigError, match="SIZE@RATE"):
        Case.parse("1KiB")
    with pytest.raises(ConfigError, match="in '1KiB@fast'"):
        Case.parse("1KiB@fast")
