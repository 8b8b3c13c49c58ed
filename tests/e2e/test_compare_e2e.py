"""``nines compare`` end to end: four real servers, their probes, one stream job, one plot."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from real_servers import NatsServer, RabbitServer, RedisServer, require

from testbroker.kafka_jars import kafka_version

RATE, SECONDS = 200, 5


def test_compare_runs_all_four_systems_through_the_pipeline(tmp_path: Path) -> None:
    for server in (NatsServer, RedisServer, RabbitServer):
        require(server(tmp_path))  # a missing server skips locally and fails in CI
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "monitor", "compare", "--cases", f"256B@{RATE}",
         "--duration", f"{SECONDS}s", "--out", str(out)],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads((out / "compare.json").read_text())
    (case,) = result["cases"]
    assert list(case["systems"]) == ["kafka", "nats", "redis", "rabbitmq"]
    assert case["expected"] == RATE * SECONDS
    for system, row in case["systems"].items():
        # the probe's summary file: every message sent, none left unresolved, no echo dropped
        probe = row["probe"]
        assert probe["sent"] == RATE * SECONDS and probe["received"] == RATE * SECONDS, system
        assert probe["unresolved"] == 0 and probe["echo_dropped"] == 0, system
        # open loop: every message intended in the run has its echo, counted once (merged
        # partition windows, no broker rollup counted twice), and a healthy server loses none
        assert row["samples"] == RATE * SECONDS, system
        assert row["lost"] == 0 and row["late"] == 0, system
        # the job labels every echo with the system its probe names (nines_system_echoes_total)
        assert row["system_echoes"] == {system: RATE * SECONDS}, system
        assert 0 < row["p50"] <= row["p99"] <= row["max_s"], system
        assert row["p99.99"] is None  # 1,000 samples cannot support four nines
    png = out / case["plot"]
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    plotted = json.loads((out / (case["plot"] + ".json")).read_text())
    assert set(plotted["curves"]) == {"kafka", "nats", "redis", "rabbitmq"}
    table = proc.stdout
    for system in ("kafka", "nats", "redis", "rabbitmq"):
        assert f"| {system} | 1,000 | 1,000 | 0 | 0 | 0 | 0 |" in table
        # the first case ran again after the last, and its p99 is compared with the first run's
        row = case["systems"][system]
        assert row["again_p99_s"] > 0 and row["stability"] in ("stable", "unstable"), row
        ratio = max(row["p99"], row["again_p99_s"]) / min(row["p99"], row["again_p99_s"])
        assert (row["stability"] == "unstable") == (ratio > 2), row
    assert "Warm-up, the same for every system" in table and "| p99 again | stability |" in table
    # the caveats and the machine's load travel with the numbers, and which Kafka it was
    assert f"The `kafka` row is Apache Kafka {kafka_version()} (one KRaft broker, RF 1)" in table
    assert "same host:" in table and "Load average (1 min) at the start and the end" in table
    assert result["kafka_version"] == kafka_version() and len(result["load_avg_1m"]) == 2
