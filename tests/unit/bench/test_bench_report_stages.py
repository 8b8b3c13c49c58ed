"""The stage breakdown and the cost model are rendered from the JSON, nothing typed in."""

from __future__ import annotations

from typing import Any

from bench.report_stages import (
    COST_TITLE,
    STAGES_TITLE,
    cost_model_section,
    stage_rows,
    stages_section,
)

CASE: dict[str, Any] = {
    "echoes_per_batch": 400_000,
    "batch_s_median": 1.9,
    "echoes_per_s_median_batch": 210_526,
    "spark_phases_s": {"triggerExecution": 1.9, "latestOffset": 0.01, "getBatch": 0.0,
                       "queryPlanning": 0.15, "walCommit": 0.06, "addBatch": 1.6,
                       "commitOffsets": 0.08},
    "execute_s": 1.4,
    "sink_s": 0.02,
    "state_task_s": {"op0_allUpdatesTimeMs": 0.05, "op0_commitTimeMs": 0.25,
                     "op1_allUpdatesTimeMs": 0.01, "op1_commitTimeMs": 0.25},
    "read_task_s": {"read_s": 0.01, "parse_s": 0.1, "combine_s": 0.4, "task_s": 0.6},
    "read_tasks_per_batch": 2,
    "cores": 2,
    "partials_per_batch": 30,
    "job_cpu_s_per_batch": 2.5,
    "first_batches_s": [24.1, 16.9, 10.1],
    "load_avg_1m_end": 4.2,
    "py_spy_top": [{"function": "index_of (core/hdr.py:96)", "share": 0.25}],
    "py_spy_process": "pyspark.daemon pyspark.worker",
}  # fmt: skip


def test_stage_rows_split_the_execution_into_reader_state_and_the_rest() -> None:
    rows = dict(stage_rows(CASE))
    assert rows["micro-batch (Spark's triggerExecution)"] == 1.9
    # two read tasks on two cores: one task's time; commits 0.5 task s over 2 cores
    assert rows["·· state: commits of both stateful steps (task s / cores)"] == 0.25
    rest = rows["·· the rest: scheduling 5 stages, 2 shuffles, Arrow to and from the JVM"]
    assert rest == 1.4 - 0.6 - (0.5 + 0.06) / 2


def test_stages_section_and_cost_model_come_from_the_json() -> None:
    stages = {"command": "python -m bench.stages --levers", "setup": "SETUP", "cases":
              {"fixed": CASE | {"echoes_per_batch": 500, "batch_s_median": 1.0,
                                "job_cpu_s_per_batch_by_process": {"jvm": 0.8, "other": 0.2}},
               "large": CASE},
              "levers": [{"lever": "1 shuffle partition", "confs":
                          {"spark.sql.shuffle.partitions": "1"}, "batch_s_median": 0.8,
                          "execute_s": 0.6, "state_task_s": {"op0_commitTimeMs": 0.06},
                          "job_cpu_s_per_batch": 0.9, "load_avg_1m_end": 3.0}]}  # fmt: skip
    text = stages_section(stages)
    assert text.startswith(STAGES_TITLE) and "SETUP" in text
    assert "| 500 echoes a batch | 400,000 echoes a batch |" in text
    assert "`index_of (core/hdr.py:96)` 25 %" in text
    assert "the jvm spends 800 ms of the job's 1.00 s of CPU per batch (80 %)" in text
    assert "took 1.90 s, of which the fixed cost is 1.00 s (53 %)" in text
    assert (
        "| 1 shuffle partition | `spark.sql.shuffle.partitions=1` | 800 ms | 600 ms | 60 ms" in text
    )
    e2e = {"targets_echoes_per_s": {"v2": 1_000_000}, "scaling_local2_over_local1":
           {"kafka v2": 1.2}, "target_scaling": 1.8, "runs": {"kafka v2 local[2]": {
               "engine": "kafka", "echo_format": "v2", "master": "local[2]",
               "batch_echoes": 1_000_000, "echoes_per_s": 300_000, "steady_batches": 5,
               "load_avg_1m_end": 5.0}}}  # fmt: skip
    scale = {"live": [{"echoes_per_s": 1000, "trigger_s": 5.0, "job_cpu_core_share": 0.2,
                       "job_cpu_us_per_echo": 200.0, "job_cpu_s_per_batch": 1.0,
                       "load_avg_1m_end": 2.0}]}  # fmt: skip
    state = {"series_admitted": 10_001, "state_rows": 30_104, "state_memory_mib": 8.0,
             "job_peak_rss_mib": 2300, "load_avg_1m_end": 9.0}  # fmt: skip
    cost = cost_model_section(scale, e2e, stages, state)
    assert cost.startswith(COST_TITLE)
    assert (
        "**300,000 echoes/s** (5 batches; load 5.0) | v2 ≥ 1,000,000/s on local[2] **not met**"
        in (cost)
    )
    assert "| local[2] / local[1] end to end, kafka v2 | 1.2× | ≥ 1.8× **not met** |" in cost
    assert "30,104 state rows, 8.0 MiB state memory, job peak RSS 2,300 MiB" in cost
    assert "| live: 1,000 echoes/s, trigger 5.0 s | 0.2 of a core" in cost
    assert "fixed cost of a micro-batch (500 echoes, local[2]) | 1.00 s wall, 2.50 s CPU" in cost
