"""HDR histograms as Spark state: bucket indices as native column expressions, merged by summing.

The bucket index is computed by Spark itself (no Python UDF) and agrees bit for bit with
``monitor.core.hdr.HdrLayout.index_of``. Every (resolution, window, series, kind, bucket) is a
group of Spark's stateful aggregation; merging histograms is adding their counts, so all
resolutions are kept at once and each closed window is emitted exactly once.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from monitor.core.hdr import HdrLayout

#: Kinds of the counted-not-measured rows (late, bad by reason, vanished offsets).
STAT_PREFIX = "stat:"


def bucket_index(value: Column, layout: HdrLayout) -> Column:
    """HDR counts index of ``value`` (µs, bigint), exactly as ``HdrLayout.index_of``."""
    v = F.greatest(value.cast("bigint"), F.lit(0).cast("bigint"))
    masked = v.bitwiseOR(F.lit(layout.sub_bucket_mask).cast("bigint"))
    guess = F.floor(F.log2(masked)).cast("int")
    # log2 in doubles can be off by one next to powers of two: correct it with exact shifts
    floor_log2 = (
        F.when(_shl(guess) > masked, guess - 1)
        .when(_shl(guess + 1) <= masked, guess + 1)
        .otherwise(guess)
    )
    bucket = floor_log2 + 1 - layout.unit_magnitude - (layout.sub_bucket_half_count_magnitude + 1)
    sub_bucket = _shr(v, bucket + layout.unit_magnitude)
    index = _shl_by(bucket + 1, layout.sub_bucket_half_count_magnitude) + (
        sub_bucket - layout.sub_bucket_half_count
    )
    return (
        F.when(v > F.lit(layout.highest_us), F.lit(layout.overflow_index))
        .otherwise(index)
        .cast("bigint")
    )


def _shl(bits: Column) -> Column:
    """1 << bits as bigint, with a column shift."""
    return _shift("shiftleft", F.lit(1).cast("bigint"), bits)


def _shr(value: Column, bits: Column) -> Column:
    return _shift("shiftright", value, bits)


def _shl_by(value: Column, bits: int) -> Column:
    return F.shiftleft(value.cast("bigint"), bits)


def _shift(fn: str, value: Column, bits: Column) -> Column:
    return F.call_function(fn, value.cast("bigint"), bits.cast("int"))


def latency_rows(echoes: DataFrame, resolutions_us: dict[str, int], finest: str) -> DataFrame:
    """One row per (record, kind, resolution): value, lost flag, weight and window end."""
    e2e = F.when(F.col("lost"), F.col("timeout_us")).otherwise(
        F.col("received_us") - F.col("intended_us")
    )
    zero = F.lit(0).cast("bigint")

    def measure(kind: Column, value: Column, lost: Column = zero) -> Column:
        return F.struct(
            kind.alias("kind"),
            value.cast("bigint").alias("value"),
            lost.cast("bigint").alias("lost"),
        )

    stat_kind = F.concat(
        F.lit(STAT_PREFIX),
        F.col("rtype"),
        F.when(F.col("reason").isNotNull(), F.concat(F.lit(":"), F.col("reason"))).otherwise(""),
    )
    measured = (
        F.when(
            F.col("rtype") == "echo",
            F.array(
                measure(F.lit("e2e"), e2e, F.col("lost")),
                measure(F.lit("publish"), F.col("acked_us") - F.col("intended_us")),
                measure(F.lit("send_lag"), F.col("sent_us") - F.col("intended_us")),
            ),
        )
        .when(F.col("rtype") == "hiccup", F.array(measure(F.lit("hiccup"), F.col("max_us"))))
        .otherwise(F.array(measure(stat_kind, zero)))
    )
    all_res = F.array(
        *[
            F.struct(F.lit(r).alias("resolution"), F.lit(us).alias("span_us"))
            for r, us in resolutions_us.items()
        ]
    )
    finest_only = F.array(
        F.struct(F.lit(finest).alias("resolution"), F.lit(resolutions_us[finest]).alias("span_us"))
    )
    rows = (
        echoes.withColumn("m", F.explode(measured))
        .where(F.col("m.value").isNotNull())
        .withColumn(
            "r",
            F.explode(
                F.when(F.col("m.kind").startswith(STAT_PREFIX), finest_only).otherwise(all_res)
            ),
        )
    )
    window_end_us = (
        F.col("event_us") - F.pmod(F.col("event_us"), F.col("r.span_us")) + F.col("r.span_us")
    )
    return rows.select(
        F.col("r.resolution").alias("resolution"),
        window_end_us.alias("window_end_us"),
        F.coalesce(F.col("cluster"), F.lit("")).alias("cluster"),
        F.coalesce(F.col("topic"), F.lit("")).alias("topic"),
        # hiccups (on time or late) have no partition: they are the probe's, label "all"
        F.when(F.col("partition").isNull() & F.col("rtype").isin("hiccup", "late"), F.lit("all"))
        .otherwise(F.coalesce(F.col("partition").cast("string"), F.lit("")))
        .alias("partition"),
        F.col("m.kind").alias("kind"),
        F.col("m.value").alias("value_us"),
        F.col("m.lost").alias("lost"),
        F.col("n"),
    )


def windowed_histograms(rows: DataFrame, layout: HdrLayout, watermark_ms: int) -> DataFrame:
    """Bucket counts per (resolution, window, series, kind, bucket), final once the window closes.

    The window end carries Spark's watermark metadata, so one stateful aggregation evicts and
    emits every resolution's windows exactly when the watermark passes their end.
    """
    window_end = F.timestamp_micros(F.col("window_end_us")).alias(
        "window_end", metadata={"spark.watermarkDelayMs": watermark_ms}
    )
    return (
        rows.withColumn("bucket", bucket_index(F.col("value_us"), layout))
        .withColumn("window_end", window_end)
        .groupBy("resolution", "window_end", "cluster", "topic", "partition", "kind", "bucket")
        .agg(
            F.sum("n").alias("count"),
            F.sum("lost").alias("lost"),
            F.max("value_us").alias("max_us"),
            F.sum(F.col("value_us") * F.col("n")).alias("sum_us"),
        )
    )
