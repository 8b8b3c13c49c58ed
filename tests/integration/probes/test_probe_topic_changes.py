"""The probe topic changed under a running ``nines probe`` on Apache Kafka (no --manage-topic):
partitions added are read back and probed; the topic deleted and created again is said, once
each, and exported (``nines_probe_topic_exists``), and probing resumes on the new topic.

One probe on a topic of its own in the session's cluster (``kafka_broker``)."""

from __future__ import annotations

import re
import time
import uuid
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewPartitions
from probe_runs import ProbeProcess, probe_metrics, until

from testbroker import EmbeddedBroker


def received(metrics: dict[str, float]) -> dict[int, float]:
    """Partition → ``nines_probe_received_total``."""
    out = {}
    for name, value in metrics.items():
        m = re.match(r'nines_probe_received_total\{.*partition="(\d+)"', name)
        if m:
            out[int(m.group(1))] = value
    return out


def test_partitions_added_and_the_topic_deleted_and_recreated_under_a_probe(
    kafka_broker: EmbeddedBroker, tmp_path: Path
) -> None:
    tag = uuid.uuid4().hex[:6]
    topic = f"tc.probe.{tag}"
    kafka_broker.create_topic(topic, 2, 1)
    admin = AdminClient({"bootstrap.servers": kafka_broker.bootstrap})
    probe = ProbeProcess(kafka_broker.bootstrap, f"tc-{tag}", tmp_path, "--topic", topic)
    gauge = f'{{cluster="default",topic="{topic}"}}'
    started = time.monotonic()
    try:
        probe.ready()
        m = probe_metrics(probe.port)
        assert (
            m[f"nines_probe_topic_exists{gauge}"],
            m[f"nines_probe_partitions_unprobed{gauge}"],
        ) == (1, 0)

        # 2 → 4 partitions, by someone else: the probe reads 2 and 3 back and probes them
        admin.create_partitions([NewPartitions(topic, 4)])[topic].result(30)
        until(
            lambda: all(received(probe_metrics(probe.port)).get(p, 0) >= 20 for p in (2, 3)),
            lambda: (probe_metrics(probe.port), probe.stderr()),
        )
        assert probe_metrics(probe.port)[f"nines_probe_partitions_unprobed{gauge}"] == 0
        # one line (another only if reading them back failed and was tried again)
        assert f"probing new partitions [2, 3] of {topic}" in probe.stderr()
        grown_s = time.monotonic() - started

        # deleted: one line, the gauge at 0, the probe runs on
        admin.delete_topics([topic], operation_timeout=30)[topic].result(60)
        until(
            lambda: probe_metrics(probe.port)[f"nines_probe_topic_exists{gauge}"] == 0,
            lambda: probe.stderr(),
        )
        assert probe.stderr().count(f"{topic}: the cluster has no such topic now") == 1

        # created again (offsets from 0): one line, the gauge at 1, every partition probed again
        def recreate() -> bool:
            try:
                kafka_broker.create_topic(topic, 4, 1)
            except ValueError:  # the deletion is still under way
                return False
            return True

        until(recreate, lambda: "topic not created again")
        until(
            lambda: probe_metrics(probe.port)[f"nines_probe_topic_exists{gauge}"] == 1,
            lambda: probe.stderr(),
        )
        before = received(probe_metrics(probe.port))
        until(
            lambda: all(received(probe_metrics(probe.port))[p] >= before[p] + 20 for p in range(4)),
            lambda: (before, probe_metrics(probe.port), probe.stderr()),
        )
        err = probe.stderr()
        assert err.count(f"{topic}: the cluster has no such topic now") == 1
        assert err.count(f"{topic} is back, with 4 partitions") == 1
        totals = probe.stop()
    finally:
        probe.kill()
    assert totals["sent"] == totals["received"] + totals["lost"] + totals["unresolved"], totals
    print(f"\nnew partitions probed {grown_s:.1f} s after start; whole run "
          f"{time.monotonic() - started:.1f} s")  # fmt: skip
