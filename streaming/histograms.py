"""HDR histograms as Spark state: whole partial histograms from the reader, merged in the JVM.

The reader (``streaming.combine``) hands Spark one row per (finest window, series, kind,
reason) carrying an encoded sparse histogram (``streaming.wire``). Every such key is a group of
Spark's stateful aggregation; ``nines_hist_merge`` (``jvm/aggregator``, a typed ``Aggregator``
with binary state) adds their counts and keeps the max. A second, chained aggregation merges
the closed finest windows into every resolution's, and each closed window is emitted exactly
once. The send-time leader is part of
the key: a partition's state splits only when its leader moves within a window, and the sink
builds partition, topic and broker series from these cells (``core.windows.with_rollups``).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from core.windows import UNKNOWN_BROKER, WindowSpec
from streaming.aggregator_jar import FUNCTION
from streaming.state_keys import (
    FIRST_STAT_CODE,
    NO_LEADER,
    PROBE_PARTITION,
    SUBJECT,
    UNKNOWN_LEADER,
    kind_labels,
)

#: The aggregate that merges histograms (registered by ``streaming.aggregator_jar``).
MERGE_FUNCTION = FUNCTION


def windowed_histograms(rows: DataFrame, windows: WindowSpec, watermark_ms: int) -> DataFrame:
    """One histogram per (resolution, window, series, kind), final once the window closes.

    Two chained stateful aggregations, both keyed on a window end that carries Spark's watermark
    metadata. The first merges the reader's histograms into the finest windows; once the
    watermark passes a finest window's end it is emitted, once, into the second, which merges
    closed finest windows into every resolution's (the finest's own passes straight through:
    its one row is closed on arrival). So the coarser resolutions are merges of closed finer
    windows, kept in Spark's checkpointed state, never read from echoes. Emitted rows get their
    string labels back (resolution, partition, broker, kind) for the sink.
    """
    subject = list(SUBJECT)
    merge = F.call_function(MERGE_FUNCTION, F.col("hist")).alias("hist")
    finest = (
        rows.withColumn("window_end", _event_time(F.col("window_end_us"), watermark_ms))
        .groupBy("window_end", *subject)
        .agg(merge)
    )
    finest_us = windows.finest_us
    end_us = F.unix_micros(F.col("window_end"))
    measured = F.col("kind") < F.lit(FIRST_STAT_CODE)
    targets = F.array(
        *[
            F.struct(
                F.lit(span_us).alias("span_us"),
                # the end of the coarser window holding the finest one ending at end_us
                ((end_us - finest_us) - F.pmod(end_us - finest_us, F.lit(span_us)) + span_us).alias(
                    "end_us"
                ),
            )
            for span_us in windows.resolutions_us.values()
        ]
    )
    # counted-not-measured rows stay in the finest resolution, the windows they are judged on
    targets = F.when(measured, targets).otherwise(F.slice(targets, 1, 1))
    every = (
        finest.select(*subject, "hist", F.explode(targets).alias("t"))
        .withColumn("span_us", F.col("t.span_us"))
        .withColumn("window_end", _event_time(F.col("t.end_us"), watermark_ms))
        .groupBy("span_us", "window_end", *subject)
        .agg(merge)
    )
    return every.select(
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


def _event_time(end_us: Column, watermark_ms: int) -> Column:
    """A window end as Spark's event time, with the watermark's metadata: its aggregation evicts
    (and emits) a window once, when the watermark passes this end."""
    return F.timestamp_micros(end_us).alias(
        "window_end", metadata={"spark.watermarkDelayMs": watermark_ms}
    )


def _label(code: Column, labels: dict[int, str]) -> Column:
    out = F.lit(None).cast("string")
    for value, label in labels.items():
        out = F.when(code == value, F.lit(label)).otherwise(out)
    return out


def _kind_label(code: Column, reason: Column) -> Column:
    label = _label(code, kind_labels())
    with_reason = F.concat(label, F.lit(":"), reason)
    return F.when((code >= FIRST_STAT_CODE) & reason.isNotNull(), with_reason).otherwise(label)
