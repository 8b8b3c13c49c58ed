"""Reports from the histogram archive: curves (pure), plot (files), load (archive), cli (flags).

``nines report`` and ``nines slo`` are registered from :mod:`monitor.report.cli`; SLO attainment
itself is :mod:`monitor.slo`.
"""

from monitor.report.curves import (
    CURVE_PERCENTILES,
    curve_data,
    merge_curves,
    percentile_curve,
    select,
)

__all__ = ["CURVE_PERCENTILES", "curve_data", "merge_curves", "percentile_curve", "select"]
