"""A partition's first and next offsets, asked with a deadline that holds.

librdkafka's ``query_watermark_offsets`` (confluent-kafka's ``get_watermark_offsets``) can wait
past its timeout, for good, while a partition's leader is new or moving: librdkafka issues
#2588 and #4878, still open in 2.16. A probe adding the partition a joining broker leads waited
in it for over 60 s, and with it the thread that publishes its echoes. ``offsets_for_times``
asks the same ListOffsets question (timestamp -1 is the log end, -2 its start) and gives up
when its timeout does.
"""

from __future__ import annotations

from typing import Any

#: ListOffsets' special timestamps: the offset after the last record, and the first retained.
LATEST, EARLIEST = -1, -2


def list_offsets(
    consumer: Any, topic: str, partitions: list[int], timeout_s: float, *, at: int = LATEST
) -> dict[int, int]:
    """Partition → offset ``at`` (:data:`LATEST` or :data:`EARLIEST`) of ``topic``.

    Raises ``KafkaException`` when the cluster does not answer within ``timeout_s``, or with a
    partition's own error.
    """
    from confluent_kafka import KafkaException, TopicPartition

    asked = [TopicPartition(topic, p, at) for p in partitions]
    found = consumer.offsets_for_times(asked, timeout=timeout_s) if asked else []
    for tp in found:
        if tp.error is not None:
            raise KafkaException(tp.error)
    return {tp.partition: tp.offset for tp in found}
