"""docs/metrics.md lists every family the stream exporter's contract defines
(``monitor.exporter.contract``): ``nines_system_echoes_total`` fed the dashboards' variables
for a release without a line in it (issue 38)."""

from __future__ import annotations

import re
from pathlib import Path

from monitor.exporter import contract as x

METRICS_MD = Path(__file__).resolve().parents[3] / "docs" / "metrics.md"


def contract_names() -> set[str]:
    """Every family name the exporter writes, as a scraper sees it."""
    names = {f for f, _, _ in (*x.WINDOW_FAMILIES, *x.BROKER_WINDOW_FAMILIES)}
    names |= {f"{name}_total" for name, _, _ in x.COUNTER_FAMILIES.values()}
    names |= {f"nines_stream_{n}" for n in x.HEALTH_DOCS}
    names |= {
        n + ("_total" if kind == x.COUNTER else "") for n, (_, kind, _) in x.SMALL_FAMILIES.items()
    }
    return names | {x.HISTOGRAM, x.NATIVE}


def metrics_md_rows() -> dict[str, str]:
    """The stream exporter's table in docs/metrics.md: family name → its type column."""
    stream = METRICS_MD.read_text().split("\n## Probe", 1)[0]
    return dict(re.findall(r"^\| `(nines_[a-z0-9_]+)` \| ([a-z ]+) \|", stream, re.MULTILINE))


def test_every_family_of_the_contract_has_a_row_in_metrics_md() -> None:
    assert len(contract_names()) > 25
    assert contract_names() - metrics_md_rows().keys() == set()


def test_metrics_md_gives_each_small_family_the_contract_s_type() -> None:
    rows = metrics_md_rows()
    for name, (_, kind, _) in x.SMALL_FAMILIES.items():
        assert rows[name + ("_total" if kind == x.COUNTER else "")] == kind, name
