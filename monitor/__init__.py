"""nines: a live latency monitor for message brokers.

This package holds the CLI, configuration, exporter, alerts and demo; ``core`` is the
shared pure core (echo schema, HDR bucket math, units) that every other package builds on.
"""

__version__ = "0.1.0"
__all__ = ["__version__"]
