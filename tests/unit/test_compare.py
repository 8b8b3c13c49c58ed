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


@pytest.mark.parametrize(
    ("first", "again", "verdict"),
    [(0.010, 0.019, "stable"), (0.010, 0.020, "stable"), (0.010, 0.0201, "unstable"),
     (0.030, 0.010, "unstable"), (0.010, None, "?"), (None, 0.010, "?"), (0.0, 0.010, "?")],
)  # fmt: skip
def test_a_first_case_run_again_more_than_2x_apart_is_unstable(
    first: float | None, again: float | None, verdict: str
) -> None:
    """The second run of the first case judges the system's state through its cases: more than
    UNSTABLE_RATIO apart either way is ``unstable``, and the table says it in bold."""
    from core.hdr import REPORTED_QUANTILES, quantile_label
    from monitor.compare import UNSTABLE_RATIO, markdown, stability

    assert UNSTABLE_RATIO == 2.0
    assert stability(first, again) == verdict
    row = {"samples": 1000, "lost": 0, "late": 0, "max_s": 0.05, "p99": first,
           "again_p99_s": again, "stability": stability(first, again),
           "probe": {"unresolved": 0, "echo_dropped": 0}}  # fmt: skip
    row.update({quantile_label(q): None for q in REPORTED_QUANTILES})
    row["p99"] = first
    result = {"cases": [{"label": "256 B at 200/s", "plot": "p.png", "expected": 1000,
                         "systems": {"nats": row}}],
              "duration_s": 5, "caveats": ["c"]}  # fmt: skip
    table = markdown(result)
    line = next(ln for ln in table.splitlines() if ln.startswith("| nats |"))
    assert line.endswith(f"| {'**unstable**' if verdict == 'unstable' else verdict} |"), line
