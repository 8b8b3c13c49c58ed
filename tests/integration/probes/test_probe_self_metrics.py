"""The probe watches itself: a real ``nines probe`` against the mock, with broker 1 slowed by
``ctl rtt``, exports its CPU, its cgroup's throttling (where the host has it) and its clients'
per-broker requests and round trips."""

from __future__ import annotations

import time
import urllib.request
from pathlib import Path

from kafka_cluster import wait_for
from probe_runs import ProbeProcess
from prometheus_client.parser import text_string_to_metric_families

from probes.cgroup import read_throttling
from probes.client_stats import STATS_INTERVAL_MS
from testbroker import EmbeddedBroker

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(port: int) -> Samples:
    """Every sample of the probe's /metrics, keyed by name and sorted labels."""
    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for fam in text_string_to_metric_families(body)
        for s in fam.samples
    }


def of(samples: Samples, name: str, **labels: str) -> dict[tuple[tuple[str, str], ...], float]:
    """The samples of ``name`` whose labels include ``labels``."""
    want = set(labels.items())
    return {k: v for (n, k), v in samples.items() if n == name and want <= set(k)}


def one(samples: Samples, name: str, **labels: str) -> float | None:
    found = of(samples, name, **labels)
    assert len(found) <= 1, found
    return next(iter(found.values()), None)


def test_probe_exports_its_cost_and_a_slow_brokers_rtt(
    fresh_broker: EmbeddedBroker, tmp_path: Path
) -> None:
    fresh_broker.rtt(1, 200)  # broker 1 leads partition 0
    probe = ProbeProcess(fresh_broker.bootstrap, "selfwatch", tmp_path, "--cluster", "sw")
    try:
        probe.ready()
        interval_s = STATS_INTERVAL_MS / 1000

        # the slow broker's RTT within a few statistics windows of the probe being up
        def slow_rtt() -> float | None:
            got = one(
                scrape(probe.port),
                "nines_probe_client_rtt_p99_seconds",
                client="producer",
                broker="1",
            )
            return got if got is not None and got >= 0.2 else None

        slow = wait_for(slow_rtt, timeout_s=5 * interval_s + 2, interval_s=0.2)
        assert slow is not None and 0.2 <= slow < 2, slow
        first = scrape(probe.port)
        time.sleep(3 * interval_s)
        second = scrape(probe.port)
    finally:
        probe.kill()
    cluster = {"cluster": "sw"}
    # RTT: broker 1 carries the injected 200 ms on every client that talks to it; the others
    # answer faster (their averages, on a loaded machine, stay well under it)
    for client in ("producer", "consumer"):
        rtt1 = one(second, "nines_probe_client_rtt_avg_seconds", client=client, broker="1")
        assert rtt1 is not None and rtt1 >= 0.2, (client, rtt1)
    for broker in ("2", "3"):
        avg = one(second, "nines_probe_client_rtt_avg_seconds", client="producer", broker=broker)
        assert avg is not None and avg < 0.2, (broker, avg)
    # requests and responses grow on every broker for the probe's producer and consumer
    for client in ("producer", "consumer"):
        for broker in ("1", "2", "3"):
            labels = {**cluster, "client": client, "broker": broker}
            for name in ("nines_probe_client_requests_total", "nines_probe_client_responses_total"):
                a, b = one(first, name, **labels), one(second, name, **labels)
                assert a is not None and b is not None and b > a, (name, labels, a, b)
    # the echo producer reports too (the echo topic is on the same cluster)
    echo = of(second, "nines_probe_client_requests_total", client="echo_producer")
    assert echo and sum(echo.values()) > 0, echo
    # CPU: a counter that grows, by less than the wall time of two cores
    cpu_a = one(first, "nines_probe_cpu_seconds_total", **cluster)
    cpu_b = one(second, "nines_probe_cpu_seconds_total", **cluster)
    assert cpu_a is not None and cpu_b is not None and 0 < cpu_a < cpu_b, (cpu_a, cpu_b)
    # throttling: exported exactly when this host's cgroup has the counters (the probe shares
    # the test's cgroup), never invented
    throttled = one(second, "nines_probe_cgroup_cpu_throttled_periods_total", **cluster)
    periods = one(second, "nines_probe_cgroup_cpu_periods_total", **cluster)
    if read_throttling() is None:
        assert throttled is None and periods is None
    else:
        assert throttled is not None and periods is not None and 0 <= throttled <= periods
    # the probe's own pauses, beside them
    assert one(second, "nines_probe_hiccup_max_seconds", **cluster) is not None
