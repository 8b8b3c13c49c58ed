"""Config of ``nines broker`` (YAML section ``broker:``): engine, brokers, topics, fixed port."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, ValidationInfo, field_validator, model_validator

from core.config import StageConfig
from core.echo import DEFAULT_ECHO_TOPIC

PROBE_TOPIC = "nines.probe"
ECHO_TOPIC = DEFAULT_ECHO_TOPIC
ECHO_PARTITIONS = 2
MAX_BROKERS = 4096
MAX_PARTITIONS = 1024

_TOPIC_RE = re.compile(r"^[A-Za-z0-9._-]{1,249}$")


def parse_topic(spec: str) -> tuple[str, int]:
    """``NAME:PARTITIONS[:RF]`` as (name, partitions); ValueError says what is wrong."""
    name, partitions, _ = parse_topic_rf(spec)
    return name, partitions


def parse_topic_rf(spec: str) -> tuple[str, int, int | None]:
    """``NAME:PARTITIONS[:RF]`` as (name, partitions, replication factor or None)."""
    rf: int | None = None
    parts = spec.split(":")
    if len(parts) == 3:
        try:
            rf = int(parts[2])
        except ValueError:
            raise ValueError("replication factor must be an integer") from None
        if not 1 <= rf <= MAX_BROKERS:
            raise ValueError(f"replication factor must be 1..{MAX_BROKERS}")
        spec = ":".join(parts[:2])
    name, sep, count = spec.rpartition(":")
    if not sep or not name:
        raise ValueError("must be NAME:PARTITIONS[:RF]")
    if not _TOPIC_RE.match(name) or name in (".", ".."):
        raise ValueError("topic name must be 1-249 of [A-Za-z0-9._-]")
    try:
        partitions = int(count)
    except ValueError:
        raise ValueError("partitions must be an integer") from None
    if not 1 <= partitions <= MAX_PARTITIONS:
        raise ValueError(f"partitions must be 1..{MAX_PARTITIONS}")
    return name, partitions, rf


def _check_topic(spec: str) -> str:
    """Validate one ``NAME:PARTITIONS`` entry, keeping it as written."""
    parse_topic(spec)
    return spec


TopicSpec = Annotated[str, AfterValidator(_check_topic)]


ENGINES = ("mock", "tansu", "kafka")
#: Apache Kafka brokers are one JVM each: five fit this project's 2-core machines.
MAX_KAFKA_BROKERS = 5


class BrokerConfig(StageConfig):
    """The embedded test cluster: which engine, how many brokers, which topics, fixed port."""

    engine: Literal["mock", "tansu", "kafka"] = Field(
        default="mock",
        description="mock: librdkafka's mock cluster, every fault injectable; tansu: one real "
        "Kafka-compatible broker (Tansu), stall/resume by signal only; kafka: Apache Kafka "
        "(KRaft, one JVM per broker), faults as real operations.",
    )
    brokers: int = Field(
        default=3, ge=1, le=MAX_BROKERS, description="Number of mock brokers (ids 1..N)."
    )
    topics: tuple[TopicSpec, ...] = Field(
        default=(),
        description="Topics as NAME:PARTITIONS[:RF]; empty means the defaults "
        "(nines.probe with one partition per broker, nines.echoes with 2). RF (kafka engine) "
        "defaults to min(3, brokers).",
    )
    sasl: bool = Field(
        default=False,
        description="kafka engine: also a SASL_SSL listener (SCRAM-SHA-512), its CA, user and "
        "password made at start (`nines broker ctl sasl` names the client config).",
    )
    warm_up: bool = Field(
        default=True,
        description="kafka engine: before ready, 1,000 msgs/s through every broker until a "
        "second's acks have p99 < 50 ms or stop improving (4-60 s): a fresh JVM's first "
        "requests run interpreted.",
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
        engine = info.data.get("engine")
        if engine == "tansu" and value != 1:
            raise ValueError("the tansu engine runs exactly 1 broker (use --engine mock for more)")
        if engine == "kafka" and value > MAX_KAFKA_BROKERS:
            raise ValueError(f"the kafka engine runs 1..{MAX_KAFKA_BROKERS} brokers (one JVM each)")
        return value

    @field_validator("sasl")
    @classmethod
    def _sasl_kafka(cls, value: bool, info: ValidationInfo) -> bool:
        """Only Apache Kafka gets a SASL_SSL listener."""
        if value and info.data.get("engine") != "kafka":
            raise ValueError("a SASL_SSL listener needs --engine kafka")
        return value

    @field_validator("topics", mode="before")
    @classmethod
    def _topics_list(cls, value: object) -> object:
        """Accept a YAML list or a single string."""
        return (value,) if isinstance(value, str) else value

    @field_validator("topics")
    @classmethod
    def _topics_unique(cls, value: tuple[str, ...], info: ValidationInfo) -> tuple[str, ...]:
        """No topic name repeats; no replication factor exceeds the brokers (refused here,
        before any broker starts, not by Kafka once its JVMs run)."""
        names = [parse_topic(spec)[0] for spec in value]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise ValueError(f"topic listed twice: {sorted(dup)[0]}")
        brokers = info.data.get("brokers")
        for spec in value:
            name, _, rf = parse_topic_rf(spec)
            if rf is not None and brokers is not None and rf > brokers:
                raise ValueError(
                    f"{name}: replication factor {rf} is more than the {brokers} broker(s) "
                    "(raise --brokers, or lower the RF)"
                )
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
        return [(name, partitions) for name, partitions, _ in self.topic_specs_rf()]

    def topic_specs_rf(self) -> list[tuple[str, int, int | None]]:
        """Topics to create with their replication factor (None: the engine's default)."""
        if self.topics:
            return [parse_topic_rf(spec) for spec in self.topics]
        return [(PROBE_TOPIC, self.brokers, None), (ECHO_TOPIC, ECHO_PARTITIONS, None)]
