"""The longest cluster, topic and probe id nines accepts: each becomes a Prometheus label value.

The series cap (``max_series``) bounds how many series there are, not how big each one is: one
64 KiB cluster name from the echo topic would be 64 KiB in every line of its every series on
every scrape. Lengths are UTF-8 bytes (a topic name is ASCII, so bytes are Kafka's characters).
An echo with a longer one is bad (``label_too_long``, docs/echo-format.md).
"""

from __future__ import annotations

from typing import Final

#: Kafka's own limit on a topic name (``kafka.common.internals.Topic.MAX_NAME_LENGTH``).
MAX_TOPIC_BYTES: Final = 249
#: A cluster name: room for a fully qualified host name's first labels, or a cloud cluster id.
MAX_CLUSTER_BYTES: Final = 128
#: A probe id (by default ``hostname-pid``: a host name is at most 64 bytes).
MAX_PROBE_BYTES: Final = 128

#: Field of the echo record → its longest value, checked in this order.
MAX_LABEL_BYTES: Final[dict[str, int]] = {
    "probe": MAX_PROBE_BYTES,
    "cluster": MAX_CLUSTER_BYTES,
    "topic": MAX_TOPIC_BYTES,
}


def label_bytes(value: str) -> int:
    """The UTF-8 length of a label value (its length when ASCII, the common case)."""
    return len(value) if value.isascii() else len(value.encode(errors="surrogatepass"))


def too_long(field: str, value: str) -> bool:
    """Whether ``value`` is longer than the limit of echo field ``field``."""
    return label_bytes(value) > MAX_LABEL_BYTES[field]
