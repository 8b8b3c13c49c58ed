"""No rendered manifest holds a null: an optional list or map is absent or of its type."""

from __future__ import annotations

from pathlib import Path

import pytest
from helm_render import SCENARIOS, nulls, render, values_of


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda p: p.stem)
def test_no_manifest_renders_a_null(scenario: Path) -> None:
    found = [
        f"{d['kind']}/{d['metadata']['name']}{where}"
        for d in render(values_of(scenario))
        for where in nulls(d)
    ]
    assert found == [], f"{scenario.name}: null where a list or map belongs: {found}"
