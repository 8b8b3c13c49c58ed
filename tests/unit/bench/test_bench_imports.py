"""Every bench module imports: a bench is run by hand (``make bench``), rarely, so a name that a
refactoring removed from under it would otherwise go unnoticed until then (the aggregation and
state-cardinality benches imported ``bench.stages._descendants`` for a session after it was
folded into ``bench.procstat``)."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import bench

MODULES = sorted(m.name for m in pkgutil.iter_modules(bench.__path__, "bench."))


def test_the_benches_are_found() -> None:
    assert {"bench.aggregation", "bench.stages", "bench.state_cardinality"} <= set(MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_bench_module_imports(name: str) -> None:
    importlib.import_module(name)
