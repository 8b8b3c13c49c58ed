"""HDR histograms as Spark state: whole partial histograms from the reader, merged in the JVM.

The reader (``streaming.combine``) hands Spark one row per (resolution, window, series, kind,
reason) carrying an encoded sparse histogram (``streaming.wire``). Every such key is a group of
Spark's stateful aggregation; ``nines_hist_merge`` (``jvm/aggregator``, a typed ``Aggregator``
with binary state) adds their counts and keeps the max, so all resolutions are kept at once and
each closed window is emitted exactly once. The send-time leader is part of
the key: a partition's state splits only when its leader moves within a window, and the sink
builds partition, topic and broker series from these cells (``core.windows.with_rollups``).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from core.windows import UNKNOWN_BROKER, WindowSpec
from streaming.aggregator_jar import FUNCTION
from streaming.combine import (
    KIND_CODES,
    NO_LEADER,
    PROBE_PARTITION,
    STAT_CODES,
    UNKNOWN_LEADER,
)

#: The aggregate that merges histograms (registered by ``streaming.aggregator_jar``).
MERGE_FUNCTION = FUNCTION
#: Kinds of the counted-not-measured rows (late, bad by reason, vanished offsets).
STAT_PREFIX = "stat:"


def windowed_histograms(rows: DataFrame, windows: WindowSpec, watermark_ms: int) -> DataFrame:
    """One histogram per (resolution, window, series, kind), final once the window closes.

    The window end carries Spark's watermark metadata, so one stateful aggregation evicts and
    emits every resolution's windows exactly when the watermark passes their end. Emitted rows
    get their string labels back (resolution, partition, broker, kind) for the sink.
    """
    window_end = F.timestamp_micros(F.col("window_end_us")).alias(
        "window_end", metadata={"spark.watermarkDelayMs": watermark_ms}
    )
    keys = ["span_us", "window_end", "cluster", "topic", "partition", "leader", "kind", "reason"]
    counts = (
        rows.withColumn("window_end", window_end)
        .groupBy(*keys)
        .agg(F.call_function(MERGE_FUNCTION, F.col("hist")).alias("hist"))
    )
    return counts.select(
        _label(F.col("span_us"), {us: r for r, us in windows.resolutions_us.items()}).alias(
            "resolution"
        ),
        "window_end",
        "cluster",
        "topic",
        F.when(F.col("partition") == PROBE_PARTITION, F.lit("all"))
        .otherwise(F.coalesce(F.col("partition").cast("string"), F.lit("")))
        .alias("partition"),
        F.when(F.col("leader") == NO_LEADER, F.lit(""))
        .when(F.col("leader") == UNKNOWN_LEADER, F.lit(UNKNOWN_BROKER))
        .otherwise(F.col("leader").cast("string"))
        .alias("broker"),
        _kind_label(F.col("kind"), F.col("reason")).alias("kind"),
        "hist",
    )


def _label(code: Column, labels: dict[int, str]) -> Column:
    out = F.lit(None).cast("string")
    for value, label in labels.items():
        out = F.when(code == value, F.lit(label)).otherwise(out)
    return out


def _kind_label(code: Column, reason: Column) -> Column:
    stat = {c: f"{STAT_PREFIX}{r}" for r, c in STAT_CODES.items()}
    label = _label(code, {c: k for k, c in KIND_CODES.items()} | stat)
    with_reason = F.concat(label, F.lit(":"), reason)
    return F.when((code >= min(STAT_CODES.values())) & reason.isNotNull(), with_reason).otherwise(
        label
    )
