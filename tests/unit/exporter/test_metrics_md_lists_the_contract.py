"""docs/metrics.md lists every family the stream exporter's contract defines
(``monitor.exporter.exposition``): ``nines_system_echoes_total`` fed the dashboards' variables
for a release without a line in it (issue 38)."""

from __future__ import annotations

import re
from pathlib import Path

from monitor.exporter import exposition as x

METRICS_MD = Path(__file__).resolve().parents[3] / "docs" / "metrics.md"


def contract_names() -> set[str]:
    """Every family name the exporter writes, as a scraper sees it."""
    names = {f for f, _, _ in (*x.WINDOW_FAMILIES, *x.BROKER_WINDOW_FAMILIES)}
    names |= {f"{name}_total" for name, _, _ in x.COUNTER_FAMILIES.values()}
    names |= {f"nines_stream_{n}" for n in x.HEALTH_DOCS}
    return names | {x.HISTOGRAM, x.NATIVE}


def test_every_family_of_the_contract_has_a_row_in_metrics_md() -> None:
    rows = set(re.findall(r"^\| `(nines_[a-z0-9_]+)`", METRICS_MD.read_text(), re.MULTILINE))
    assert len(contract_names()) > 15
    assert contract_names() - rows == set()
