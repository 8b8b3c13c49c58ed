"""The Kafka side of the source: the echo consumer, the log's ends, and the consume loop.

Runs inside Spark (the driver plans with ``watermarks``/``log_ends``, the read tasks run
``consume_ranges``); callers open and close the consumer, so nothing here outlives a task.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from core.kafka_conf import KafkaAuth
from kafkautil import EARLIEST, LATEST, list_offsets
from kafkautil.acls import STREAM_GROUP_PREFIX
from runtime.config_io import resolve_secrets
from streaming.gaps import Gap, KafkaRange, RangeBook

#: Records per ``consume`` call at most.
FETCH_BATCH = 10_000
#: Bytes of Kafka values parsed, marked and combined at a time. A read task's whole range of v2
#: batches (bench.e2e: 500 of ~73 KB) comes in one ``consume`` call; ~57 at a time cost it
#: 0.01-0.04 µs less per echo than all 500 at once (arrays that stay in cache; ``python -m
#: bench.combiner --task``). Asking ``consume`` for ~57 at a time instead, to parse while
#: librdkafka fetches the rest, gained nothing on Apache Kafka 4.1.1 (the records are queued
#: long before they are parsed). v1 fetches (10,000 records of ~300 B) stay whole.
PARSE_BYTES = 4 * 1024 * 1024
#: Seconds without records before checking whether retention removed the ones we wait for.
IDLE_RECHECK_S = 2.0
#: Seconds ``latestOffset`` waits for the Fetch that finds the log's end before planning with
#: ListOffsets' answer alone (a batch that ends early only delays the rest to the next one).
TAIL_FETCH_TIMEOUT_S = 5.0
#: Seconds for a topic's metadata and for its partitions' watermarks.
WATERMARK_TIMEOUT_S = 10.0


def open_consumer(bootstrap: str, kafka: dict[str, Any], auth: KafkaAuth | None = None) -> Any:
    """A consumer for the echo topic, tuned for throughput; ``kafka`` overrides the settings,
    and ``auth`` adds its own (an MSK IAM token callback, made here, in the worker)."""
    from confluent_kafka import Consumer

    from kafkautil.auth import auth_settings

    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"{STREAM_GROUP_PREFIX}{os.getpid()}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "fetch.wait.max.ms": 50,
            # A task reads each partition up to its range's end, but a fetch brings up to
            # max.partition.fetch.bytes of it: what lies past the end is fetched, decompressed
            # and dropped (and fetched again by the next batch). 1 MiB a partition (librdkafka's
            # default; 10 MiB before) halved a read task's consume for a backlog read a batch at
            # a time: 512 v2 messages from 32 of 64 partitions holding 6.5 M echoes, 0.315 ->
            # 0.159 s wall, 0.254 -> 0.123 CPU-s; the whole backlog in one batch 0.315 -> 0.326 s
            # (python -m bench.consume, load 2.5-2.8). The pre-fetch queue: at most 16 MiB.
            "max.partition.fetch.bytes": 1024 * 1024,
            "fetch.max.bytes": 50 * 1024 * 1024,
            "queued.min.messages": 500_000,
            "queued.max.messages.kbytes": 16 * 1024,
            # an offset removed while we read: restart at the oldest one, and count the gap
            "auto.offset.reset": "earliest",
            # env:/file: secrets resolve here, where the consumer runs (the executor has
            # the Secret), so no secret ever enters Spark's options, plans or logs
            **resolve_secrets(kafka),
            **auth_settings(auth or KafkaAuth()),
        }
    )


#: Errors of a topic deleted (or not yet created again), or of a partition without a leader for
#: now: the planner keeps its offsets and asks again at the next trigger.
TOPIC_UNAVAILABLE = (
    "UNKNOWN_TOPIC_OR_PART",
    "UNKNOWN_TOPIC_ID",
    "LEADER_NOT_AVAILABLE",
    "NOT_LEADER_FOR_PARTITION",
    "_UNKNOWN_TOPIC",
    "_UNKNOWN_PARTITION",
)
#: librdkafka's all-zero topic id: a broker that keeps none.
_NO_TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAA"


def open_admin(bootstrap: str, kafka: dict[str, Any], auth: KafkaAuth | None = None) -> Any:
    """An AdminClient beside the echo consumer: only it can ask a topic's id (DescribeTopics).

    ``kafka`` is the consumer's pass-through, and ``auth`` its login (an MSK IAM token callback
    or OIDC, made here as for the consumer); its consumer-only keys would each log a
    configuration warning from this client, so it logs errors only.
    """
    from confluent_kafka.admin import AdminClient

    from kafkautil.auth import auth_settings

    return AdminClient(
        {
            "bootstrap.servers": bootstrap,
            **resolve_secrets(kafka),
            **auth_settings(auth or KafkaAuth()),
            "log_level": 3,
        }
    )


def topic_id(admin: Any, topic: str) -> str | None:
    """The topic's id (base64, as Kafka prints it), None when the broker keeps none; raises
    ``KafkaException`` when it does not answer, or refuses (``_UNSUPPORTED_FEATURE``: never)."""
    from confluent_kafka import TopicCollection

    futures = admin.describe_topics(TopicCollection([topic]), request_timeout=WATERMARK_TIMEOUT_S)
    found = str(futures[topic].result(timeout=WATERMARK_TIMEOUT_S).topic_id)
    return None if found in ("", "None", _NO_TOPIC_ID) else found


def watermarks(c: Any, topic: str) -> dict[str, tuple[int, int]]:
    """ListOffsets' (low, high) watermarks of every partition of ``topic``, keyed as Spark's
    offsets are (the partition number as a string). Asked with ``offsets_for_times``, whose
    timeout holds through a leader change (kafkautil.offsets)."""
    md = c.list_topics(topic, timeout=WATERMARK_TIMEOUT_S)
    found = md.topics.get(topic)
    parts = sorted(found.partitions) if found is not None and found.error is None else []
    low = list_offsets(c, topic, parts, WATERMARK_TIMEOUT_S, at=EARLIEST)
    high = list_offsets(c, topic, parts, WATERMARK_TIMEOUT_S, at=LATEST)
    return {str(p): (low[p], high[p]) for p in parts}


def log_ends(c: Any, topic: str, marks: dict[str, tuple[int, int]]) -> dict[str, int]:
    """The offset after each partition's last record, found by fetching the log's tail.

    ListOffsets' high watermark ``h`` is the log end on Kafka and the mock, but the last
    record batch's base offset + 1 on Tansu 0.6.0 (docs/brokers.md). A Fetch from ``h - 1``
    answers at once on every broker (a record is there) with the whole batch holding it,
    queued all together, so the records delivered show the end. Only delivered records
    count, so the end never passes one a consumer cannot read. A partition with no answer
    within ``TAIL_FETCH_TIMEOUT_S`` keeps ``h``: its rest comes one batch later, never lost.
    """
    from confluent_kafka import KafkaError, TopicPartition

    ends = {p: high for p, (_, high) in marks.items()}
    tail = {int(p): high - 1 for p, (low, high) in marks.items() if high > low}
    if not tail:
        return ends
    c.assign([TopicPartition(topic, p, o) for p, o in tail.items()])
    waiting = set(tail)
    try:
        deadline = time.monotonic() + TAIL_FETCH_TIMEOUT_S
        while time.monotonic() < deadline:
            answered = not waiting
            msgs = c.consume(FETCH_BATCH, 0)
            if not msgs and not answered:
                msgs = c.consume(1, 0.1)  # back as soon as one record or EOF is there
            for m in msgs:
                p, o, err = m.partition(), m.offset(), m.error()
                if err is None and p in tail and o >= tail[p]:
                    ends[str(p)] = max(ends[str(p)], o + 1)
                elif err and err.code() == KafkaError._PARTITION_EOF and o > tail.get(p, o):
                    ends[str(p)] = max(ends[str(p)], o)  # the fetch position met the end
                else:
                    continue  # an error (ListOffsets' answer stands) or a leftover
                waiting.discard(p)
            if answered and len(msgs) < FETCH_BATCH:
                break  # what came with the answers is read: the queue ran dry
    finally:
        c.unassign()
    return ends


def low_watermark(c: Any, topic: str, partition: int) -> int | None:
    """The partition's first offset still retained (None while the broker does not answer)."""
    from confluent_kafka import KafkaException

    try:
        return list_offsets(c, topic, [partition], 5.0, at=EARLIEST)[partition]
    except KafkaException:
        return None


@dataclass
class Fetched:
    """One fetch's records in offset order per partition: value (None: a tombstone), Kafka
    timestamp in µs (None: none) and partition."""

    values: list[bytes | None] = field(default_factory=list)
    kafka_us: list[int | None] = field(default_factory=list)
    partitions: list[int] = field(default_factory=list)

    def pieces(self, max_bytes: int = PARSE_BYTES) -> Iterator[Fetched]:
        """The records in order, in pieces of about ``max_bytes`` of values (at least one record
        each): what the source parses at a time."""
        start, size = 0, 0
        for i, v in enumerate(self.values):
            size += len(v) if v is not None else 0
            if size >= max_bytes:
                yield self._slice(start, i + 1)
                start, size = i + 1, 0
        if start < len(self.values) or not self.values:
            yield self._slice(start, len(self.values))

    def _slice(self, a: int, b: int) -> Fetched:
        if a == 0 and b == len(self.values):
            return self
        return Fetched(self.values[a:b], self.kafka_us[a:b], self.partitions[a:b])


def consume_ranges(
    c: Any,
    topic: str,
    ranges: list[KafkaRange],
    stall_timeout_s: float,
    recreated: Callable[[], bool] | None = None,
) -> Iterator[Fetched | Gap]:
    """Read every range to its end through ``c``: the records, and the gaps retention left.

    An offset below the retained ones resets to the oldest retained record
    (``auto.offset.reset``), whose offset then reveals the gap. A broker that sends nothing for
    ``stall_timeout_s`` while the records still exist fails the batch (RuntimeError) rather
    than skip them, unless ``recreated()`` says the topic was deleted and created again since
    the batch was planned: the records wanted are gone then, and counted as a gap.
    """
    from confluent_kafka import KafkaError, TopicPartition

    book = RangeBook(ranges)
    c.assign([TopicPartition(topic, p, o) for p, o in book.offset.items()])
    idle_since: float | None = None
    while book.open:
        msgs = c.consume(min(FETCH_BATCH, book.pending()), 1.0)
        got = Fetched()
        finished = []
        values, partitions, stamps = got.values, got.partitions, got.kafka_us
        next_record = book.next_record
        for m in msgs:
            if m.error():
                if m.error().code() != KafkaError._PARTITION_EOF:
                    raise RuntimeError(f"kafka: {m.error().str()}")
                continue
            p, o = m.partition(), m.offset()
            if not next_record(p, o):  # not simply the next record of an open range
                if not book.wants(p, o):  # done, or already read (re-assign)
                    continue
                gap, inside = book.arrive(p, o)
                if gap is not None:  # offsets vanished before or while we read (retention)
                    yield gap
                if p not in book.open:
                    finished.append(TopicPartition(topic, p))
                if not inside:
                    continue
            values.append(m.value())
            partitions.append(p)
            kind, ms = m.timestamp()
            stamps.append(ms * 1000 if kind else None)
        if finished:  # stop fetching what this batch does not need
            c.pause(finished)
        if got.values:
            idle_since = None
            yield got
            continue
        if msgs:
            continue
        now = time.monotonic()
        idle_since = idle_since or now
        if now - idle_since < IDLE_RECHECK_S:
            continue
        # Nothing arrives: either retention overtook us (count it, go on from the new low
        # watermark), or the topic was recreated under the batch (the records wanted are gone:
        # count them; the planner reads the new log, streaming.resets), or the broker is slow
        # or down (wait; the records still exist).
        moved = False
        gone = recreated is not None and recreated()
        for p in sorted(book.open):
            low = book.end[p] if gone else low_watermark(c, topic, p)
            gap = book.skip_to(p, low) if low is not None else None
            if gap is not None:
                yield gap
                moved = True
        if not book.open:
            return
        if moved:
            c.assign([TopicPartition(topic, p, book.offset[p]) for p in sorted(book.open)])
            idle_since = None
        elif now - idle_since > stall_timeout_s:
            waiting = ", ".join(f"[{p}] at offset {book.offset[p]}" for p in sorted(book.open))
            raise RuntimeError(
                f"kafka: no records from {topic} {waiting} for {stall_timeout_s:g} s (the "
                "batch needs them); failing the batch instead of skipping them"
            )
