"""Bad input, generated: every case is one line naming the field, exit 2, and no connection.

The cases come from ``bad_input_cases.SOURCES`` (hand-written ones, and generators that walk the
stages' models and the CLI's parsers); each runs the real CLI entry point in-process with
file-descriptor-level capture and a listening socket as the bootstrap server. The same cases,
with what nines answered, are the table in docs/configuration.md (``test_the_table_is_published``).
"""

from __future__ import annotations

from collections import Counter

import pytest
from bad_input_cases import (
    BAD_HASHES,
    CATEGORIES,
    DOC,
    WRONG_YAML,
    Case,
    all_cases,
    category,
    outcome,
    problems,
    published_table,
    render_table,
    section_models,
)

CASES = all_cases()


@pytest.mark.parametrize(
    "case", CASES, ids=[f"{i}-{c.source}-{c.command}" for i, c in enumerate(CASES)]
)
def test_bad_input_is_one_line_exit_2_and_no_connection(case: Case) -> None:
    result = outcome(case)
    assert problems(case, result) == [], (case, result)
    assert "Traceback" not in result.err


def test_at_least_150_cases_across_the_cli_and_the_yaml() -> None:
    sources = Counter(c.source for c in CASES)
    assert len(CASES) >= 150, sources
    assert sum(1 for c in CASES if c.config is not None) >= 100
    assert sum(1 for c in CASES if c.config is None) >= 50


def test_every_category_is_in_the_table_with_its_count() -> None:
    """The CLI, the YAML, the archives and the web config: each counted in the table's head."""
    from tests.unit.report.bad_archives import cases as archive_cases

    counts = Counter(category(c) for c in CASES)
    assert set(counts) == set(CATEGORIES)
    assert counts["archives"] == len(archive_cases()) >= 100
    web = [c for c in CASES if c.source == "web-config"]
    assert {c.command for c in web} == {"probe", "stream"}
    assert all("--web-config-file" in c.flags for c in web)
    assert len({c.fixture for c in web if c.fixture}) >= len(BAD_HASHES) + 50
    head = render_table().splitlines()[2]
    assert head.startswith(f"{len(CASES)} cases")
    for key, name in CATEGORIES.items():
        assert f" {counts[key]} {name}" in head


def test_every_field_gets_most_wrong_types() -> None:
    """The walk skips only the kinds a field's type admits (null for optional ones, ...)."""
    for name, model in section_models().items():
        for field, info in model.model_fields.items():
            key = info.alias or field
            fed = [c for c in CASES if c.source == "yaml-types" and c.expect == f"{name}.{key}"]
            assert len(fed) >= len(WRONG_YAML) - 2, (name, key, len(fed))


def test_the_issue_examples_are_among_the_cases() -> None:
    inputs = {(c.command, c.flags[-2:], c.config) for c in CASES}
    kafka = ("--bootstrap", "LISTENER")
    assert ("probe", kafka, "probe: {rate: [1, 2]}\n") in inputs
    assert ("probe", kafka, "probe: {loss_timeout: .inf}\n") in inputs
    assert ("probe", kafka, "prob: {a: 1}\n") in inputs
    assert ("stream", ("--trigger", "500us"), None) in inputs
    assert ("probe", ("--loss-timeout", "30d"), None) in inputs
    assert ("probe", ("--cluster", ""), None) in inputs


def test_the_table_is_published() -> None:
    committed = published_table(DOC.read_text(encoding="utf-8"))
    assert committed == render_table(), (
        "regenerate: PYTHONPATH=$PWD python tests/unit/bad_input_cases.py --write"
    )
