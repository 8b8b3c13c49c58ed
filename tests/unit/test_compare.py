"""``nines compare``'s pure parts: the case syntax and the probe's stop line."""

from __future__ import annotations

import pytest

from core.config import ConfigError
from monitor.compare import Case
from probes.agent import summary_totals


def test_summary_totals_reads_the_last_stopped_line_of_a_probe_log() -> None:
    log = (
        "2026-11-23 18:00:00 INFO nines.probe: probing nines.probe (1 partitions, 200 msgs/s)\n"
        "2026-11-23 18:00:05 INFO nines.probe: stopped: sent=9 received=9 lost=0 unresolved=0 "
        "echo_records_published=9 echo_dropped=0\n"
        "2026-11-23 18:00:09 WARNING nines.probe: stopping with 3 messages still in flight\n"
        "2026-11-23 18:00:09 INFO nines.probe: stopped: sent=1000 received=990 lost=7 "
        "unresolved=3 echo_records_published=997 echo_dropped=2\n"
    )
    assert summary_totals(log) == {
        "sent": 1000,
        "received": 990,
        "lost": 7,
        "unresolved": 3,
        "echo_records_published": 997,
        "echo_dropped": 2,
    }
    assert summary_totals("a probe that never stopped cleanly\n") == {}


def test_cases_parse_sizes_and_rates_and_refuse_the_rest() -> None:
    assert Case.parse("1KiB@3000") == Case(1024, 3000.0)
    assert Case.parse("256B@20000").key == "256B-20000"
    with pytest.raises(ConfigError, match="SIZE@RATE"):
        Case.parse("1KiB")
    with pytest.raises(ConfigError, match="in '1KiB@fast'"):
        Case.parse("1KiB@fast")
