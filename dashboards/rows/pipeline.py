"""Health of the Spark job: input rate, batch duration, watermark lag, state, freshness."""

from dashboards.common import count_timeseries, single_stat

ROW = "Pipeline health"


def panels() -> list[object]:
    """The stream job's own gauges."""
    return [
        count_timeseries(
            "Input rows per second",
            [("nines_stream_input_rows_per_second", "rows/s")],
            "Echoes read per second.",
            unit="ops",
        ),
        count_timeseries(
            "Micro-batch duration",
            [("nines_stream_batch_duration_seconds", "batch")],
            "Should stay below the trigger.",
            unit="s",
        ),
        count_timeseries(
            "Watermark lag",
            [("nines_stream_watermark_lag_seconds", "lag")],
            "Now minus the event-time watermark: how stale closed windows are.",
            unit="s",
        ),
        count_timeseries(
            "State rows",
            [("nines_stream_state_rows", "rows")],
            "Rows of histogram buckets in Spark's state store.",
        ),
        single_stat(
            "Since last micro-batch",
            ("time() - max(nines_stream_last_batch_timestamp_seconds)", "age"),
            "Seconds since the stream job last completed a micro-batch.",
            "s",
        ),
    ]
