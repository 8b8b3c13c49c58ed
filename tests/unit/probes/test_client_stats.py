"""The probe's self metrics from real inputs: a librdkafka statistics document as librdkafka
wrote it, cgroup ``cpu.stat`` files of both versions, and the exposition Prometheus' linter
reads."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from exposition_lint import promtool_findings
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from probes.cgroup import Throttling, parse_cpu_stat, read_throttling, stat_paths
from probes.client_stats import BOOTSTRAP, STALE_INTERVALS, ClientStats, parse_stats
from probes.metrics import SelfCollector

DOCUMENT = (
    Path(__file__).resolve().parents[2] / "data" / "librdkafka_stats_producer.json"
).read_text()


class Clock:
    def __init__(self) -> None:
        self.now_s = 100.0

    def __call__(self) -> float:
        return self.now_s


def test_a_real_document_gives_each_brokers_counters_and_rtt() -> None:
    handle, brokers = parse_stats(DOCUMENT)
    raw = json.loads(DOCUMENT)["brokers"]
    assert handle == "rdkafka#producer-1"
    assert sorted(brokers) == ["1", "2", "3"]
    for b in raw.values():
        got = brokers[str(b["nodeid"])]
        assert (got.requests, got.request_bytes, got.responses, got.response_bytes) == (
            b["tx"], b["txbytes"], b["rx"], b["rxbytes"]
        )  # fmt: skip
        assert (got.rtt_avg_us, got.rtt_p99_us) == (b["rtt"]["avg"], b["rtt"]["p99"])
    # broker 1 was slowed by 200 ms (ctl rtt 1 200) when the document was written
    assert brokers["1"].rtt_p99_us is not None and brokers["1"].rtt_p99_us >= 200_000
    assert brokers["2"].rtt_avg_us is not None and brokers["2"].rtt_avg_us < 200_000


def test_bootstrap_logical_and_idle_brokers() -> None:
    doc: dict[str, Any] = json.loads(DOCUMENT)
    template = next(iter(doc["brokers"].values()))
    idle_rtt = {**template["rtt"], "cnt": 0, "avg": 0, "p99": 0}
    doc["brokers"] = {
        "a:9092/bootstrap": {**template, "nodeid": -1, "source": "configured", "tx": 2, "rx": 1},
        "b:9092/bootstrap": {**template, "nodeid": -1, "source": "configured", "tx": 3, "rx": 3},
        "GroupCoordinator": {**template, "nodeid": -1, "source": "logical", "tx": 50},
        "c:9092/4": {**template, "nodeid": 4, "source": "learned", "tx": 7, "rtt": idle_rtt},
    }
    _, brokers = parse_stats(json.dumps(doc))
    assert sorted(brokers) == ["4", BOOTSTRAP]
    assert (brokers[BOOTSTRAP].requests, brokers[BOOTSTRAP].responses) == (5, 4)
    # no response in the window: no RTT, never a 0
    assert brokers["4"].rtt_avg_us is None and brokers["4"].rtt_p99_us is None


def test_counters_sum_over_handles_and_never_go_down_and_a_stale_rtt_is_dropped() -> None:
    clock = Clock()
    stats = ClientStats(interval_ms=1000, clock=clock)
    on_stats = stats.callback("consumer")
    doc = json.loads(DOCUMENT)
    on_stats(DOCUMENT)
    second = {**doc, "name": "rdkafka#consumer-9"}
    on_stats(json.dumps(second))
    totals = stats.totals()
    first = parse_stats(DOCUMENT)[1]["1"]
    assert totals[("consumer", "1")].requests == 2 * first.requests
    assert totals[("consumer", "1")].rtt_p99_us == first.rtt_p99_us
    # the first handle closed: it reports no more, and its counts stay in the sum
    clock.now_s += STALE_INTERVALS + 1
    on_stats(json.dumps(second))
    totals = stats.totals()
    assert totals[("consumer", "1")].requests == 2 * first.requests
    assert totals[("consumer", "1")].rtt_p99_us == first.rtt_p99_us  # the fresh handle's
    clock.now_s += STALE_INTERVALS + 1
    assert stats.totals()[("consumer", "1")].rtt_p99_us is None
    on_stats("{not json")  # kept as it came (no parse on the client's thread), counted when read
    assert stats.bad_documents == 0
    stats.totals()
    stats.totals()  # parsed once
    assert stats.bad_documents == 1


V2 = (
    "usage_usec 12\nuser_usec 8\nsystem_usec 4\n"
    "nr_periods 120\nnr_throttled 30\nthrottled_usec 1500000\n"
)
V1 = "nr_periods 50\nnr_throttled 5\nthrottled_time 2000000000\nnr_bursts 0\nburst_time 0\n"


def test_cpu_stat_of_either_version_and_none_without_bandwidth_fields() -> None:
    assert parse_cpu_stat(V2) == Throttling(120, 30, 1.5)
    assert parse_cpu_stat(V1) == Throttling(50, 5, 2.0)
    assert parse_cpu_stat("usage_usec 12\nuser_usec 8\nsystem_usec 4\n") is None
    assert parse_cpu_stat("") is None


def test_the_process_own_cgroup_file_is_found_and_an_absent_one_is_none(tmp_path: Path) -> None:
    (tmp_path / "kubepods" / "pod1").mkdir(parents=True)
    (tmp_path / "kubepods" / "pod1" / "cpu.stat").write_text(V2)
    membership = tmp_path / "cgroup"
    membership.write_text("0::/kubepods/pod1\n")
    assert read_throttling(tmp_path, membership) == Throttling(120, 30, 1.5)
    # v1: the cpu controller's hierarchy
    (tmp_path / "cpu,cpuacct" / "job").mkdir(parents=True)
    (tmp_path / "cpu,cpuacct" / "job" / "cpu.stat").write_text(V1)
    membership.write_text("4:memory:/x\n2:cpu,cpuacct:/job\n")
    assert read_throttling(tmp_path, membership) == Throttling(50, 5, 2.0)
    assert stat_paths("2:cpu,cpuacct:/job\n", tmp_path)[0] == tmp_path / "cpu,cpuacct/job/cpu.stat"
    # no file anywhere: nothing (never a made-up 0)
    assert read_throttling(tmp_path / "none", tmp_path / "missing") is None


def render(throttling: Throttling | None, stats: ClientStats) -> bytes:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SelfCollector(lambda: {"cluster": "c"}, stats, lambda: throttling))
    return generate_latest(registry)


def test_self_metrics_pass_promtool_and_are_absent_without_inputs() -> None:
    stats = ClientStats()
    stats.callback("producer")(DOCUMENT)
    body = render(Throttling(120, 30, 1.5), stats)
    assert promtool_findings(body) == []
    got = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for fam in text_string_to_metric_families(body.decode())
        for s in fam.samples
    }
    one = (("broker", "1"), ("client", "producer"), ("cluster", "c"))
    assert got[("nines_probe_client_rtt_p99_seconds", one)] == pytest.approx(0.299007)
    assert got[("nines_probe_cgroup_cpu_throttled_seconds_total", (("cluster", "c"),))] == 1.5
    assert got[("nines_probe_cpu_seconds_total", (("cluster", "c"),))] > 0
    bare = render(None, ClientStats()).decode()
    assert "nines_probe_cpu_seconds_total" in bare
    assert "cgroup" not in bare and "nines_probe_client_" not in bare
