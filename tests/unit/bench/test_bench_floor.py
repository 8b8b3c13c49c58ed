"""The floor bench: every echo of the interval accounted for, and both brokers in the report."""

from __future__ import annotations

from pathlib import Path
from unittest.mock import patch

from bench.floor import ENGINES, SETTINGS, run_key, summarise
from bench.report import render
from bench.report_probe import floor_section, headline_floor
from bench.run import PARTS, RUNNERS
from core.echo import Echo, encode_record

RATE_PP = 100.0  # per partition: seq k is intended at start + k * 10 ms
START = {0: 1_700_000_000_000_000, 1: 1_700_000_000_005_000}  # staggered, as the probe does


def echo(p: int, seq: int, e2e_us: int, probe: str = "floor-x", lost: bool = False) -> bytes:
    at = START[p] + int(seq * 1e6 / RATE_PP)
    received = None if lost else at + e2e_us
    timeout = 30_000_000 if lost else None
    return encode_record(
        Echo(
            probe,
            "bench",
            "nines.probe",
            p,
            1,
            seq,
            1024,
            at,
            at + 50,
            at + 300,
            received,
            lost,
            timeout,
        )
    )


def test_summary_counts_missing_duplicates_lost_and_takes_exact_quantiles() -> None:
    values: list[bytes | None] = []
    for p in (0, 1):
        values += [echo(p, k, 1000 + k) for k in range(0, 40) if (p, k) != (1, 17)]
    values.append(echo(0, 12, 1012))  # a duplicate
    values[5] = echo(0, 5, 0, lost=True)
    values += [echo(0, 3, 9_999_999, probe="someone-else"), b"{not json", None]
    # the interval holds seqs 10..29 of each partition
    w0, w1 = START[0] + 100_000, START[0] + 300_000
    s = summarise(values, "floor-x", w0, w1, RATE_PP)
    assert (s["expected"], s["partitions_seen"]) == (40, 2)
    assert (s["messages"], s["missing"], s["duplicates"], s["lost"]) == (40, 1, 1, 0)
    assert s["bad_records"] == 2  # not JSON, and a tombstone
    e2e = sorted([1000 + k for k in range(10, 30)] * 2 + [1012])
    e2e.remove(1017)  # partition 1's seq 17 never came
    assert s["e2e_us"] == {"p50": e2e[19], "p99": e2e[-1], "p999": e2e[-1], "max": 1029}
    # by slice of intended time (5 s here holds the whole interval; 0.1 s splits it in two)
    assert [(x["from_s"], x["echoes"], x["max"]) for x in s["e2e_us_by_slice"]] == [(0.0, 40, 1029)]
    with patch("bench.floor.SLICE_US", 100_000):
        split = summarise(values, "floor-x", w0, w1, RATE_PP)["e2e_us_by_slice"]
    assert [(x["from_s"], x["echoes"], x["max"]) for x in split] == [
        (0.0, 20, 1019),
        (0.1, 20, 1029),
    ]
    # a lost echo inside the interval is counted, and its loss timeout is its latency
    values[15] = echo(0, 15, 0, lost=True)
    s = summarise(values, "floor-x", w0, w1, RATE_PP)
    assert (s["lost"], s["missing"], s["messages"]) == (1, 1, 40)
    assert s["e2e_us"] is not None and s["e2e_us"]["max"] == 30_000_000


def test_one_run_measures_every_engine_with_the_same_settings() -> None:
    assert set(ENGINES) == {"kafka", "kafka-3", "mock", "tansu"} and {} in SETTINGS
    assert ENGINES["kafka"] == ("kafka", 1, 1) and ENGINES["kafka-3"] == ("kafka", 3, 3)
    assert "floor" in PARTS and "floor" in RUNNERS
    keys = [run_key(e, k) for k in SETTINGS for e in ENGINES]
    assert keys[:4] == ["kafka", "kafka-3", "mock", "tansu"] and len(set(keys)) == len(keys)


RESULT = {
    "method": "a toy method",
    "runs": {
        "mock": {
            "engine": "mock",
            "kafka_settings": {},
            "rate_total_per_s": 1000,
            "messages": 30_000,
            "missing": 0,
            "e2e_us": {"p50": 6_510, "p99": 11_000, "p999": 13_700, "max": 15_800},
            "publish_us": {"p50": 211, "p999": 3_430},
            "send_lag_us": {"p999": 900},
        },
        "tansu": {
            "engine": "tansu",
            "kafka_settings": {},
            "rate_total_per_s": 1000,
            "messages": 29_990,
            "missing": 10,
            "e2e_us": {"p50": 4_200, "p99": 9_000, "p999": 12_100, "max": 20_500},
            "e2e_us_by_slice": [
                {"from_s": 0.0, "echoes": 5000, "p50": 3_000, "max": 9_000},
                {"from_s": 5.0, "echoes": 5000, "p50": 80_000, "max": 400_000},
            ],
        },
        "tansu fetch.wait.max.ms=1": {
            "engine": "tansu",
            "kafka_settings": {"fetch.wait.max.ms": "1"},
            "error": "BrokerStartError: tansu did not start",
        },
    },
}


def test_report_puts_both_brokers_side_by_side(tmp_path: Path) -> None:
    text = floor_section(RESULT)
    rows = {line.split(" | ")[0].lstrip("| "): line for line in text.splitlines() if "|" in line}
    assert "6.51 ms" in rows["mock"] and "13.7 ms" in rows["mock"] and "15.8 ms" in rows["mock"]
    tansu = [line for line in text.splitlines() if line.startswith("| tansu |")]
    assert "4.2 ms" in tansu[0] and "20.5 ms" in tansu[0] and "**10 missing**" in tansu[0]
    assert "**failed**: BrokerStartError" in tansu[1] and "`fetch.wait.max.ms: 1`" in tansu[1]
    assert "fetch.wait.max.ms" in text  # the fetch-wait floor is explained
    assert "- tansu, defaults: p50 3 ms, 80 ms; max 9 ms, 400 ms" in text  # drift by 5 s
    head = headline_floor({"floor": RESULT})
    assert "mock p50 **6.51 ms**" in head and "tansu p50 **4.2 ms**" in head
    assert "fetch.wait" not in head  # the headline compares the defaults only
    assert "not measured (no result file)" in headline_floor({})
    doc = render({"floor": RESULT}, tmp_path / "img", tmp_path / "benchmarks.md")
    assert "## End-to-end floor: Apache Kafka, the mock and Tansu side by side" in doc
    assert "| tansu |" in doc
