"""Benchmarks and accuracy reports for nines against the naive ways (``make bench``).

Every number in ``docs/benchmarks.md`` comes from a JSON file under ``bench/results/`` written by
a run of ``python -m bench.run``; ``bench.report`` only formats those files.
"""

__all__ = ["accuracy", "coordinated_omission", "machine", "methods", "promql", "report", "run"]
