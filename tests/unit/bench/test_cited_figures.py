"""A docstring that cites docs/benchmarks.md's "figures the code cites" for its numbers has them
there (``bench/results/cited.json``), and the report renders that file and the v1 parse's."""

from __future__ import annotations

import json
import re
from pathlib import Path

from bench.report_cited import CITED_TITLE, PARSE_V1_TITLE, cited_section, parse_v1_section

ROOT = Path(__file__).resolve().parents[3]
CITE = "figures the code cites"


def citing_modules() -> set[str]:
    """Dotted names of the product modules whose text cites the table."""
    out = set()
    for pkg in ("core", "runtime", "probes", "streaming", "monitor"):
        for path in (ROOT / pkg).rglob("*.py"):
            if CITE in re.sub(r"\s+", " ", path.read_text()):
                out.add(".".join(path.relative_to(ROOT).with_suffix("").parts))
    return out


def test_every_module_that_cites_a_figure_has_one_in_cited_json() -> None:
    cited = json.loads((ROOT / "bench" / "results" / "cited.json").read_text())
    named = " ".join(f["code"] for f in cited["figures"])
    citing = citing_modules()
    assert len(citing) >= 5
    assert {m for m in citing if m not in named} == set()


def test_the_sections_render_what_the_files_hold() -> None:
    cited = json.loads((ROOT / "bench" / "results" / "cited.json").read_text())
    text = cited_section(cited)
    assert text.startswith(CITED_TITLE) and all(f["figure"] in text for f in cited["figures"])
    parse = {
        "echoes": 1000,
        "bytes_per_echo": 281,
        "series": 12,
        "fetch": 100,
        "runs": 3,
        "load": [1.0, 2.0],
        "paths": {
            "job": {"parse": {"median_us": 4.0, "fastest_us": 3.0}},
            "json reader only": {"parse": {"median_us": 20.0, "fastest_us": 15.0}},
        },
    }
    text = parse_v1_section(parse)
    assert (
        text.startswith(PARSE_V1_TITLE) and "**5.0x**" in text and "| job | 4.00 (3.00) |" in text
    )
    assert "Not measured" in parse_v1_section(None)
