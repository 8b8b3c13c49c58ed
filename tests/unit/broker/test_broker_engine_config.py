"""BrokerConfig.engine: the mock stays the default; tansu is exactly one broker."""

from __future__ import annotations

import pytest

from core.config import ConfigError, build
from testbroker.config import BrokerConfig


def test_mock_is_the_default_engine() -> None:
    cfg = BrokerConfig()
    assert cfg.engine == "mock" and cfg.brokers == 3


def test_tansu_defaults_to_one_broker_and_one_probe_partition() -> None:
    cfg = build(BrokerConfig, {"engine": "tansu"})
    assert cfg.brokers == 1
    assert cfg.topic_specs() == [("nines.probe", 1), ("nines.echoes", 2)]
    assert build(BrokerConfig, {"engine": "tansu"}, {"brokers": 1}).brokers == 1


@pytest.mark.parametrize(
    ("values", "field"),
    [
        ({"engine": "tansu", "brokers": 3}, "broker.brokers"),
        ({"engine": "kafka", "brokers": 6}, "broker.brokers"),
        ({"engine": "redpanda"}, "broker.engine"),
        ({"sasl": True}, "broker.sasl"),
    ],
)
def test_bad_engine_settings_name_the_field(values: dict[str, object], field: str) -> None:
    with pytest.raises(ConfigError, match=field):
        build(BrokerConfig, values, prefix="broker")
