"""The vocabulary of Spark's state keys: what a partial histogram's key columns mean.

The reader (``streaming.combine``) writes these codes, the series cap (``streaming.admission``)
reads the same rows, and the stateful aggregation (``streaming.histograms``) turns them back into
labels on the few rows a closed window emits; each code is defined here, once. The state groups
on small integers, not strings.
"""

from __future__ import annotations

import pyarrow as pa

#: Measured kinds and their codes.
KIND_CODES = {"e2e": 0, "publish": 1, "send_lag": 2, "hiccup": 3}
#: Counted-not-measured row types (``rtype`` from the source) and their codes; ``system`` counts
#: echoes by the system probed (its name in ``reason``), so one job serves every broker kind.
#: ``offsets_reset`` counts a partition whose offsets went back (``streaming.resets``).
STAT_CODES = {"late": 10, "bad": 11, "data_loss": 12, "system": 13, "offsets_reset": 14}
#: Every code from this one on is counted, not measured.
FIRST_STAT_CODE = min(STAT_CODES.values())
#: The label of a counted kind: ``stat:<row type>``, then ``:<reason>`` where it has one.
STAT_PREFIX = "stat:"
#: Partition code of the probe's own rows (hiccups): labelled ``all``.
PROBE_PARTITION = -1
#: Leader code of rows that have none (hiccups, counted-not-measured rows): no ``broker``.
NO_LEADER = -2
#: Leader code of an echo whose probe knew no leader when it sent (``-1`` in the echo).
UNKNOWN_LEADER = -1

#: What a value is about: its series (at the send-time leader) and kind, or a counter's reason.
SUBJECT_FIELDS = [
    ("cluster", pa.string()),
    ("topic", pa.string()),
    ("partition", pa.int64()),
    ("leader", pa.int64()),
    ("kind", pa.int32()),
    ("reason", pa.string()),
]
SUBJECT = tuple(name for name, _ in SUBJECT_FIELDS)
#: The key of a partial histogram: a state key of Spark's aggregation (finest windows only).
HIST_KEYS = ("window_end_us", *SUBJECT)
#: What the reader hands Spark: one whole histogram (``streaming.wire``) per key.
PARTIAL_SCHEMA = pa.schema(
    [
        ("window_end_us", pa.int64()),
        *SUBJECT_FIELDS,
        ("hist", pa.binary()),
        ("event_us", pa.int64()),
    ]
)


def kind_labels() -> dict[int, str]:
    """Kind code → its label (a counted kind's without its reason)."""
    stat = {c: f"{STAT_PREFIX}{r}" for r, c in STAT_CODES.items()}
    return {c: k for k, c in KIND_CODES.items()} | stat
