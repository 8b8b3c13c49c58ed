"""Config of ``nines broker`` (YAML section ``broker:``): engine, brokers, topics, fixed port."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, ValidationInfo, field_validator, model_validator

from core.config import StageConfig

PROBE_TOPIC = "nines.probe"
ECHO_TOPIC = "nines.echoes"
ECHO_PARTITIONS = 2
MAX_BROKERS = 64
MAX_PARTITIONS = 1024

_TOPIC_RE = re.compile(r"^[A-Za-z0-9._-]{1,249}$")


def parse_topic(spec: str) -> tuple[str, int]:
    """``NAME:PARTITIONS`` as (name, partitions); ValueError says what is wrong."""
    name, sep, count = spec.rpartition(":")
    if not sep or not name:
        raise ValueError("must be NAME:PARTITIONS")
    if not _TOPIC_RE.match(name) or name in (".", ".."):
        raise ValueError("topic name must be 1-249 of [A-Za-z0-9._-]")
    try:
        partitions = int(count)
    except ValueError:
        raise ValueError("partitions must be an integer") from None
    if not 1 <= partitions <= MAX_PARTITIONS:
        raise ValueError(f"partitions must be 1..{MAX_PARTITIONS}")
    return name, partitions


def _check_topic(spec: str) -> str:
    """Validate one ``NAME:PARTITIONS`` entry, keeping it as written."""
    parse_topic(spec)
    return spec


TopicSpec = Annotated[str, AfterValidator(_check_topic)]


ENGINES = ("mock", "tansu")


class BrokerConfig(StageConfig):
    """The embedded test cluster: which engine, how many brokers, which topics, fixed port."""

    engine: Literal["mock", "tansu"] = Field(
        default="mock",
        description="mock: librdkafka's mock cluster, every fault injectable; tansu: one real "
        "Kafka-compatible broker (Tansu), stall/resume by signal only.",
    )
    brokers: int = Field(
        default=3, ge=1, le=MAX_BROKERS, description="Number of mock brokers (ids 1..N)."
    )
    topics: tuple[TopicSpec, ...] = Field(
        default=(),
        description="Topics as NAME:PARTITIONS; empty means the defaults "
        "(nines.probe with one partition per broker, nines.echoes with 2).",
    )
    port: int | None = Field(
        default=None,
        ge=1,
        le=65535,
        description="Fixed loopback port of broker 1 (broker i gets port+i-1) via a forwarder.",
    )

    @model_validator(mode="before")
    @classmethod
    def _tansu_is_one_broker(cls, values: Any) -> Any:
        """Tansu runs one broker: ``brokers`` defaults to 1 there and may not be more."""
        tansu = isinstance(values, dict) and values.get("engine") == "tansu"
        if tansu and values.get("brokers") is None:
            return {**values, "brokers": 1}
        return values

    @field_validator("brokers")
    @classmethod
    def _engine_brokers(cls, value: int, info: ValidationInfo) -> int:
        """The tansu engine is a single broker; several need the mock."""
        if info.data.get("engine") == "tansu" and value != 1:
            raise ValueError("the tansu engine runs exactly 1 broker (use --engine mock for more)")
        return value

    @field_validator("topics", mode="before")
    @classmethod
    def _topics_list(cls, value: object) -> object:
        """Accept a YAML list or a single string."""
        return (value,) if isinstance(value, str) else value

    @field_validator("topics")
    @classmethod
    def _topics_unique(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        """No topic name repeats."""
        names = [parse_topic(spec)[0] for spec in value]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise ValueError(f"topic listed twice: {sorted(dup)[0]}")
        return value

    @field_validator("port")
    @classmethod
    def _ports_fit(cls, value: int | None, info: ValidationInfo) -> int | None:
        """All N forwarded ports (port .. port+N-1) must be valid port numbers."""
        brokers = info.data.get("brokers", 1)
        if value is not None and value + brokers - 1 > 65535:
            raise ValueError(f"port + brokers - 1 must be <= 65535 with {brokers} brokers")
        return value

    def topic_specs(self) -> list[tuple[str, int]]:
        """Topics to create, with the defaults filled in."""
        if self.topics:
            return [parse_topic(spec) for spec in self.topics]
        return [(PROBE_TOPIC, self.brokers), (ECHO_TOPIC, ECHO_PARTITIONS)]
