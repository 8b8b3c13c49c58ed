"""Kafka helpers shared by the stages: one place that reads a topic's metadata for all of them."""

from kafkautil.metadata import (
    ConnectFailures,
    NoAnswer,
    TopicLayout,
    current_leaders,
    describe_topic,
    layout_of,
)
from kafkautil.offsets import EARLIEST, LATEST, list_offsets

__all__ = [
    "EARLIEST",
    "LATEST",
    "ConnectFailures",
    "NoAnswer",
    "TopicLayout",
    "current_leaders",
    "describe_topic",
    "layout_of",
    "list_offsets",
]
