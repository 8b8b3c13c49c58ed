"""BrokerConfig: defaults, NAME:PARTITIONS parsing, one-line errors that name the field."""

from __future__ import annotations

import pytest

from core.config import ConfigError, build
from testbroker.config import BrokerConfig, parse_topic, parse_topic_rf


def test_defaults_one_probe_partition_per_broker() -> None:
    assert BrokerConfig().topic_specs() == [("nines.probe", 3), ("nines.echoes", 2)]
    assert BrokerConfig(brokers=5).topic_specs()[0] == ("nines.probe", 5)


def test_explicit_topics_replace_defaults_and_yaml_string_is_accepted() -> None:
    cfg = build(BrokerConfig, {"topics": "orders:6"})
    assert cfg.topic_specs() == [("orders", 6)]
    assert BrokerConfig(topics=("a.b-c_d:1", "x:2")).topic_specs() == [("a.b-c_d", 1), ("x", 2)]


def test_parse_topic_name_partitions_and_replication() -> None:
    assert parse_topic("t:1") == ("t", 1)
    assert parse_topic("a.b:1024") == ("a.b", 1024)
    assert parse_topic_rf("t:6:3") == ("t", 6, 3)
    assert parse_topic_rf("t:6") == ("t", 6, None)
    assert parse_topic("t:6:3") == ("t", 6)
    with pytest.raises(ValueError, match="partitions must be an integer"):
        parse_topic("ns:topic:3")  # ':' is not legal in a Kafka topic name
    with pytest.raises(ValueError, match="topic name"):
        parse_topic("a:b:c:3")
    with pytest.raises(ValueError, match=r"replication factor must be 1\.\.4096"):
        parse_topic_rf("t:1:0")


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"brokers": 0}, "broker.brokers: Input should be greater than or equal to 1 (got 0)"),
        (
            {"brokers": 4097},
            "broker.brokers: Input should be less than or equal to 4096 (got 4097)",
        ),
        ({"topics": ["bad"]}, "broker.topics.0: must be NAME:PARTITIONS[:RF] (got 'bad')"),
        ({"topics": ["t:0"]}, "broker.topics.0: partitions must be 1..1024 (got 't:0')"),
        ({"topics": ["t:x"]}, "broker.topics.0: partitions must be an integer (got 't:x')"),
        ({"topics": ["sp ace:1"]}, "broker.topics.0: topic name must be"),
        ({"topics": ["a:1", "a:2"]}, "broker.topics: topic listed twice: a"),
        ({"port": 65534}, "broker.port: port + brokers - 1 must be <= 65535 with 3 brokers"),
        ({"port": 0}, "broker.port: Input should be greater than or equal to 1"),
        ({"replicas": 3}, "broker.replicas: unknown key"),
    ],
)
def test_bad_values_give_one_line_naming_the_field(values: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError) as err:
        build(BrokerConfig, values, prefix="broker")
    text = str(err.value)
    assert text.startswith(message) and "\n" not in text


def test_flags_override_yaml_and_config_is_frozen() -> None:
    cfg = build(BrokerConfig, {"brokers": 2, "port": 19092}, {"brokers": 4, "port": None})
    assert (cfg.brokers, cfg.port) == (4, 19092)
    with pytest.raises(Exception, match="frozen"):
        cfg.brokers = 1
