"""HDR histograms as Spark state: bucket indices as native column expressions, merged by summing.

The bucket index is computed by Spark itself (no Python UDF) and agrees bit for bit with
``core.hdr.HdrLayout.index_of``. Every (resolution, window, series, send-time leader, kind,
bucket) is a group of Spark's stateful aggregation; merging histograms is adding their counts, so
all resolutions are kept at once and each closed window is emitted exactly once.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from core.echo import LATENCY_SPANS
from core.hdr import HdrLayout
from core.windows import UNKNOWN_BROKER, WindowSpec, window_end_us

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


#: Measured kinds and their codes: grouping on small integers, not strings, is what makes the
#: stateful aggregation fast; labels are put back only on the few rows a closed window emits.
KIND_CODES = {"e2e": 0, "publish": 1, "send_lag": 2, "hiccup": 3}
#: Counted-not-measured row types (``rtype`` from the source) and their codes.
STAT_CODES = {"late": 10, "bad": 11, "data_loss": 12}
#: Partition code of the probe's own rows (hiccups): labelled ``all``.
PROBE_PARTITION = -1
#: Leader code of rows that have none (hiccups, counted-not-measured rows): no ``broker``.
NO_LEADER = -2
#: Leader code of an echo whose probe knew no leader when it sent (``-1`` in the echo).
UNKNOWN_LEADER = -1


def latency_column(kind: str) -> Column:
    """One measured kind of an echo row, as ``core.echo.LATENCY_SPANS`` defines it."""
    span = LATENCY_SPANS[kind]
    value = F.col(span.end) - F.col(span.start)
    if span.if_lost is None:
        return value
    return F.when(F.col("lost"), F.col(span.if_lost)).otherwise(value)


def latency_rows(echoes: DataFrame, windows: WindowSpec, layout: HdrLayout) -> DataFrame:
    """One row per (record, kind, resolution): HDR bucket, value, lost flag, weight, window end.

    The bucket is computed once per (record, kind), before the rows fan out to the resolutions.
    """
    zero = F.lit(0).cast("bigint")

    def measure(code: int, value: Column, lost: Column = zero) -> Column:
        return F.struct(
            F.lit(code).cast("int").alias("kind"),
            value.cast("bigint").alias("value"),
            lost.cast("bigint").alias("lost"),
        )

    stat_code = F.lit(None).cast("int")
    for rtype, code in STAT_CODES.items():
        stat_code = F.when(F.col("rtype") == rtype, F.lit(code)).otherwise(stat_code)
    measured = (
        F.when(
            F.col("rtype") == "echo",
            F.array(
                *(
                    # the kind with a value for lost messages is the one that counts them
                    measure(
                        KIND_CODES[kind], latency_column(kind), F.col("lost") if s.if_lost else zero
                    )
                    for kind, s in LATENCY_SPANS.items()
                )
            ),
        )
        .when(F.col("rtype") == "hiccup", F.array(measure(KIND_CODES["hiccup"], F.col("max_us"))))
        .otherwise(
            F.array(
                F.struct(
                    stat_code.alias("kind"), zero.alias("value"), zero.cast("bigint").alias("lost")
                )
            )
        )
    )
    all_spans = F.array(*[F.lit(us).cast("bigint") for us in windows.resolutions_us.values()])
    finest_only = F.array(F.lit(windows.finest_us).cast("bigint"))
    is_stat = F.col("m.kind") >= min(STAT_CODES.values())
    rows = (
        echoes.select(
            "rtype",
            "reason",
            "cluster",
            "topic",
            "partition",
            "leader",
            "event_us",
            "n",
            F.explode(measured).alias("m"),
        )
        .where(F.col("m.value").isNotNull() & F.col("m.kind").isNotNull())
        .withColumn("bucket", bucket_index(F.col("m.value"), layout))
        .withColumn("span_us", F.explode(F.when(is_stat, finest_only).otherwise(all_spans)))
    )
    return rows.select(
        F.col("span_us"),
        window_end_us(F.col("event_us"), F.col("span_us")).alias("window_end_us"),
        F.coalesce(F.col("cluster"), F.lit("")).alias("cluster"),
        F.coalesce(F.col("topic"), F.lit("")).alias("topic"),
        # hiccups (on time or late) have no partition: they are the probe's, label "all"
        F.when(
            F.col("partition").isNull() & F.col("rtype").isin("hiccup", "late"),
            F.lit(PROBE_PARTITION).cast("bigint"),
        )
        .otherwise(F.col("partition"))
        .alias("partition"),
        # the send-time leader splits a partition's state only when it moves within a window
        F.when(
            F.col("rtype") == "echo",
            F.coalesce(F.col("leader"), F.lit(UNKNOWN_LEADER)),
        )
        .otherwise(F.lit(NO_LEADER))
        .cast("bigint")
        .alias("leader"),
        F.col("m.kind").alias("kind"),
        F.when(is_stat, F.col("reason")).alias("reason"),
        F.col("bucket"),
        F.col("m.value").alias("value_us"),
        F.col("m.lost").alias("lost"),
        F.col("n"),
    )


def windowed_histograms(rows: DataFrame, windows: WindowSpec, watermark_ms: int) -> DataFrame:
    """Bucket counts per (resolution, window, series, leader, kind, bucket), final once the
    window closes.

    The window end carries Spark's watermark metadata, so one stateful aggregation evicts and
    emits every resolution's windows exactly when the watermark passes their end. Emitted rows
    get their string labels back (resolution, partition, broker, kind) for the sink, which
    builds partition, topic and broker series from these cells (``core.windows.with_rollups``).
    """
    window_end = F.timestamp_micros(F.col("window_end_us")).alias(
        "window_end", metadata={"spark.watermarkDelayMs": watermark_ms}
    )
    keys = [
        "span_us", "window_end", "cluster", "topic", "partition", "leader", "kind", "reason",
        "bucket",
    ]  # fmt: skip
    counts = (
        rows.withColumn("window_end", window_end)
        .groupBy(*keys)
        .agg(
            F.sum("n").alias("count"),
            F.sum("lost").alias("lost"),
            F.max("value_us").alias("max_us"),
            F.sum(F.col("value_us") * F.col("n")).alias("sum_us"),
        )
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
        "bucket",
        "count",
        "lost",
        "max_us",
        "sum_us",
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
