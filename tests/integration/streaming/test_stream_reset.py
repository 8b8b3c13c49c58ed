"""The echo topic deleted and recreated under a running stream (offsets back to 0), on Apache
Kafka: one line says so, the event is counted (``nines_offsets_reset_total``), and every echo of
the new topic is aggregated exactly once (issue 41).

The reader's own test finds a recreate by the topic id alone (the new log already past the old
offsets); the command's test is what an operator sees from ``nines stream``.
"""

from __future__ import annotations

import json
import os
import re
import signal
import time
import urllib.request
from collections import Counter
from pathlib import Path

import pytest
from kafka_cluster import producer, unique_topic
from pyspark.sql.streaming.datasource import ReadAllAvailable
from stream_jobs import archived, assert_exactly_once, push, send, stream_cli, wait_running
from test_stream_source import T0, echo, read_all, reader

from streaming.resets import RESETS, TOPIC_ID, partition_offsets
from testbroker import EmbeddedBroker


def recreate(cluster: EmbeddedBroker, topic: str, partitions: int) -> None:
    """Delete ``topic`` and create it again (Kafka deletes asynchronously: retry the create)."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.delete_topics([topic], operation_timeout=30)[topic].result(30)
    deadline = time.monotonic() + 60
    while True:
        try:
            cluster.create_topic(topic, partitions)
            return
        except KafkaException:  # still marked for deletion
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def test_the_reader_finds_a_recreated_topic_by_its_id_and_reads_it_from_0(
    kafka_broker: EmbeddedBroker, caplog: pytest.LogCaptureFixture
) -> None:
    """The new log is already longer than the offsets read (no end below them): the changed
    topic id alone tells, the batch reads the new log from 0, and counts the reset once."""
    topic = unique_topic(kafka_broker, 1)
    p = producer(kafka_broker.bootstrap)
    for i in range(5):
        p.produce(topic, echo(i, T0 + i), partition=0)
    p.flush()
    r = reader(kafka_broker.bootstrap, topic, starting_offsets="earliest")
    try:
        start = r.initialOffset()
        first = r.latestOffset(start, ReadAllAvailable())
        assert partition_offsets(first) == {"0": 5} and first[TOPIC_ID]
        recreate(kafka_broker, topic, 1)
        p = producer(kafka_broker.bootstrap)
        for i in range(100, 108):
            p.produce(topic, echo(i, T0 + i), partition=0)
        p.flush()
        with caplog.at_level("WARNING", "nines.stream.source"):
            end = r.latestOffset(first, ReadAllAvailable())
        assert end[TOPIC_ID] != first[TOPIC_ID] and end[RESETS] == {"0": 0}
        assert partition_offsets(end) == {"0": 8}
        (line,) = [m for m in caplog.messages if "offsets went back" in m]
        assert f"'{topic}'" in line and "[0] 5 -> 8" in line, line
        assert f"topic id {first[TOPIC_ID]} -> {end[TOPIC_ID]}" in line, line
        (part,) = r.partitions(first, end)  # what Spark hands on, as logged: a replay alike
        rows = read_all(r, part).to_pylist()
        assert [x["rtype"] for x in rows] == ["offsets_reset"] + ["echo"] * 8
        assert (rows[0]["topic"], rows[0]["partition"], rows[0]["n"]) == (topic, 0, 1)
        assert [x["intended_us"] for x in rows[1:]] == [T0 + i for i in range(100, 108)]
        # the next batch starts there: nothing counted again, no line
        caplog.clear()
        assert r.latestOffset(end, ReadAllAvailable()) == {"0": 8, TOPIC_ID: end[TOPIC_ID]}
        assert not caplog.messages
    finally:
        r.stop()


def test_a_read_whose_records_were_deleted_under_it_counts_them_and_ends(
    kafka_broker: EmbeddedBroker,
) -> None:
    """A batch planned on the old log, read after the recreate: the topic id changed, so the
    records wanted are counted as vanished (data_loss) instead of waited for until the stall
    timeout fails the batch, and every replay of it."""
    topic = unique_topic(kafka_broker, 1)
    p = producer(kafka_broker.bootstrap)
    for i in range(5):
        p.produce(topic, echo(i, T0 + i), partition=0)
    p.flush()
    r = reader(kafka_broker.bootstrap, topic, stall_timeout_s=60)
    try:
        (part,) = r.partitions({"0": 0}, r.latestOffset({"0": 0}, ReadAllAvailable()))
        recreate(kafka_broker, topic, 1)
        rows = read_all(r, part).to_pylist()
        assert [(x["rtype"], x["partition"], x["n"]) for x in rows] == [("data_loss", 0, 5)]
    finally:
        r.stop()


def offsets_read(ckpt: Path) -> dict[str, int]:
    """The partitions' end offsets of the last batch Spark committed (empty before one)."""
    ids = sorted(int(f.name) for f in (ckpt / "commits").glob("*") if f.name.isdigit())
    if not ids:
        return {}
    lines = (ckpt / "offsets" / str(ids[-1])).read_text().splitlines()
    return partition_offsets(json.loads(lines[2]))


def scrape(log: Path) -> str:
    port = re.search(r"/metrics on [^:\s]+:(\d+)", log.read_text(errors="replace"))
    assert port, log.read_text(errors="replace")[-3000:]
    with urllib.request.urlopen(f"http://127.0.0.1:{port[1]}/metrics", timeout=10) as resp:
        return str(resp.read().decode())


def test_nines_stream_says_counts_and_reads_a_recreated_echo_topic_exactly_once(
    kafka_broker: EmbeddedBroker, tmp_path: Path
) -> None:
    topic = unique_topic(kafka_broker, 2)
    log = tmp_path / "stream.log"
    t0 = (int(time.time()) // 60 * 60 - 3600) * 1_000_000
    expected: Counter[int] = Counter()
    send(kafka_broker.bootstrap, topic, range(0, 600), t0, expected)  # 12 s of echoes
    proc = stream_cli(kafka_broker.bootstrap, topic, tmp_path, log)
    began = time.monotonic()
    try:
        wait_running(lambda: sum(offsets_read(tmp_path / "ckpt").values()) == 600, proc, log, 180)
        old = offsets_read(tmp_path / "ckpt")
        recreate(kafka_broker, topic, 2)
        # the next 6 s of echoes, all in the new topic's log (fewer than the old one held)
        send(kafka_broker.bootstrap, topic, range(600, 900), t0, expected)
        push(kafka_broker.bootstrap, topic, t0 + 600_000_000)  # closes every window
        windows = set(expected)
        closed = lambda: windows <= {w.window_start_us for w in archived(tmp_path / "archive")}  # noqa: E731
        wait_running(closed, proc, log, 180)
        wait_running(lambda: "nines_offsets_reset_total{" in scrape(log), proc, log, 30)
        metrics = scrape(log)
        os.killpg(proc.pid, signal.SIGTERM)
        assert proc.wait(60) == 0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    took = time.monotonic() - began
    text = log.read_text(errors="replace")
    lines = [x for x in text.splitlines() if "offsets went back" in x]
    assert len(lines) == 1, text[-3000:]
    shown = ", ".join(f"[{p}] {old[p]} -> " for p in sorted(old))
    assert f"echo topic '{topic}'" in lines[0] and "deleted and recreated" in lines[0], lines
    assert all(f"[{p}] {old[p]} -> " in lines[0] for p in old), (shown, lines)
    for p in old:
        assert f'nines_offsets_reset_total{{partition="{p}",topic="{topic}"}} 1.0' in metrics
    assert f'nines_data_loss_offsets_total{{partition="0",topic="{topic}"}}' not in metrics
    # every echo, old topic's and new's, in its window exactly once
    got = archived(tmp_path / "archive")
    assert_exactly_once(got, expected)
    assert 'nines_late_echoes_total{cluster="c",partition="0",topic="t"}' not in metrics
    print(f"recreate under a running stream: {took:.1f} s")
