"""Probe configuration: typed, frozen, validated, with explicit hard limits."""

from __future__ import annotations

import math
import os
import socket
from typing import Any, Literal

from pydantic import PrivateAttr, SecretStr, ValidationInfo, field_validator, model_validator

from core.config import (
    kafka_bootstrap,
    kafka_topic_name,
    label,
    tcp_port,
)
from core.echo import DEFAULT_ECHO_TOPIC
from core.echo_v2 import MAX_BATCH_ECHOES
from core.kafka_conf import KafkaAuthConfig, ProbeKafka
from core.labels import MAX_LABEL_BYTES, label_bytes
from core.redact import redact_url, remember_url
from core.settings import setting
from core.units import format_duration, parse_duration_s, parse_rate, parse_size_bytes
from core.windows import DEFAULT_WINDOWS
from kafkautil.acls import FLEET_GROUP_PREFIX, PROBE_GROUP_PREFIX
from runtime.config_io import resolve_secret, resolve_secrets

#: Bytes of the probe header inside every payload (see probes.payload).
HEADER_BYTES = 64
#: Hard limits: a monitor must never become the load on the system it watches.
MAX_SIZE_BYTES = 1024 * 1024
MAX_TOTAL_RATE = 20_000.0
#: At least one message per partition in each of the stream job's finest windows (10s by
#: default): fewer leave windows with no sample, whose quantiles and max are missing, not low.
MIN_RATE_WINDOW_S = DEFAULT_WINDOWS.finest_us / 1e6
MIN_RATE = 1 / MIN_RATE_WINDOW_S
#: The echo record's field of each label setting: the stream drops an echo whose label is
#: longer than ``core.labels.MAX_LABEL_BYTES`` (``label_too_long``), so the probe refuses it.
LABEL_FIELDS = {"cluster": "cluster", "probe_id": "probe"}


#: ``--bootstrap`` URL scheme → the system probed; a plain ``host:port`` list is Kafka.
SCHEMES: dict[str, str] = {"nats": "nats", "redis": "redis", "amqp": "rabbitmq"}
#: Messages a non-Kafka transport holds for its client thread: ``rate × loss_timeout``, within.
MIN_SEND_QUEUE, MAX_SEND_QUEUE = 10_000, 1_000_000
#: librdkafka's ``message.timeout.ms`` is a signed 32-bit count of ms; the probe producer's is
#: ``loss_timeout`` + this (a lost message is declared by us, before librdkafka gives up).
DELIVERY_MARGIN_MS = 5000
#: A fleet replica's group session timeout: a replica killed without leaving the group has its
#: partitions moved after this (Kafka's default was 10 s until 3.0; brokers allow 6 s and up).
FLEET_SESSION_TIMEOUT_MS = 10_000
MAX_LOSS_TIMEOUT_S = (2**31 - 1 - DELIVERY_MARGIN_MS) // 1000


def system_of(bootstrap: str) -> str:
    """The system a ``--bootstrap`` value names: its URL scheme's, or ``kafka`` without one."""
    scheme, sep, _ = bootstrap.partition("://")
    return SCHEMES.get(scheme.lower(), "?") if sep else "kafka"


def _check_url(url: str) -> str:
    """A nats://, redis:// or amqp:// URL with a host and a valid port; the error hides secrets."""
    from urllib.parse import urlsplit

    remember_url(url)  # a library's error may quote its password, whatever it holds
    shown = redact_url(url)
    if system_of(url) == "?":
        raise ValueError(
            f"unknown scheme in {shown}: use nats://, redis://, amqp:// or a Kafka host:port list"
        )
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 (raises on a port that is not a number in 0-65535)
    except ValueError:
        raise ValueError(f"bad URL {shown}: its port must be a number in 0-65535") from None
    if not parts.hostname:
        raise ValueError(f"bad URL {shown}: no host")
    return url


def _default_probe_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


class ProbeConfig(KafkaAuthConfig):
    """Where to probe, how fast, and how long to wait before a message counts as lost."""

    bootstrap: str = setting(
        help="target: Kafka host:port list, or nats://host:4222, redis://host:6379, "
        "amqp://user:pass@host:5672/vhost (RabbitMQ)"
    )
    echo_bootstrap: str | None = setting(
        None, validate_default=True, default_text="--bootstrap", help="cluster for echo records"
    )
    topic: str = setting("nines.probe", help="probe topic")
    echo_topic: str = setting(DEFAULT_ECHO_TOPIC, help="echo topic")
    rate: float = setting(100.0, help="messages per second per partition")
    #: staggered: partition i of n sends i / (rate × n) after partition 0; aligned: every
    #: partition on one tick, so the partitions a broker leads share a produce request
    #: (docs/brokers.md, "One tick or staggered")
    schedule: Literal["staggered", "aligned"] = setting(
        "staggered", help="staggered: partitions send in turn; aligned: on one shared tick"
    )
    size: int = setting(512, unit="size", note="max 1MiB", help="payload bytes")
    cluster: str = setting("default", help="name of the probed cluster, its label")
    probe_id: str = setting(
        default_factory=_default_probe_id, default_text="host-pid", help="probe id"
    )
    loss_timeout: float = setting(30.0, unit="duration", help="declare a message lost after this")
    echo_buffer: int = setting(100_000, help="echo records queued for the echo cluster")
    #: v1: one JSON echo per Kafka message; v2: batches (docs/echo-format.md)
    echo_format: Literal["v1", "v2"] = setting(
        "v2", help="v2: batches of echoes (default); v1: one JSON echo per message"
    )
    #: v2 only: a batch is sent at this many records, and at least every 100 ms
    echo_batch: int = setting(1000, help="v2 only: records a batch is sent at")
    hiccup_interval: float = setting(
        1.0, unit="duration", help="interval of the probe's own pause records"
    )
    metrics_host: str = setting("127.0.0.1", help="metrics address")
    #: exporter-toolkit web config for /metrics (TLS, basic auth); None: plain HTTP
    web_config_file: str | None = setting(
        None, help="TLS and basic auth for /metrics, in Prometheus exporter-toolkit's format"
    )
    metrics_port: int = setting(9465, note="0 disables", help="metrics port")
    shutdown_timeout: float = setting(
        10.0, unit="duration", help="on SIGTERM, how long to wait for outstanding echoes"
    )
    duration: float | None = setting(
        None, unit="duration", default_text="until SIGTERM", help="stop after this long"
    )
    kafka: ProbeKafka = setting(default_factory=dict, help="librdkafka settings for all clients")
    #: Topic management (off by default): create the topics, add partitions for new brokers.
    manage_topic: bool = setting(
        False,
        help="create the probe and echo topics when missing; add a partition for each broker "
        "that joins (never a reassignment)",
    )
    #: With manage_topic, also elect preferred leaders (never without it; never a reassignment).
    rebalance: bool = setting(
        False, help="with --manage-topic: also elect preferred leaders so every broker leads one"
    )
    partitions_per_broker: int = setting(
        1, ge=1, le=100, help="k: a created topic has brokers × k partitions"
    )
    #: Replicas of what management creates; None: 3 (at most the brokers), or the topic's own.
    replication_factor: int | None = setting(
        None, ge=1, le=32, default_text="3, at most the brokers", help="replicas of a created topic"
    )
    manage_interval: float = setting(
        60.0, unit="duration", help="how often topic management looks at the cluster"
    )
    #: nats:// only: publish through JetStream (the PubAck is the ack) instead of core NATS
    nats_jetstream: bool = setting(
        False, help="nats:// only: publish through JetStream (its PubAck is the ack)"
    )
    #: redis:// only: XADD/XREAD on a stream (the XADD reply is the ack) instead of pub/sub
    redis_streams: bool = setting(
        False, help="redis:// only: a stream (XADD's reply is the ack) instead of pub/sub"
    )
    #: A probe fleet (docs/deploy.md, "A probe fleet"): replicas with the same group share the
    #: topic's partitions as Kafka's consumer group assigns them; None: this probe probes all
    fleet_group: str | None = setting(
        None,
        help="Kafka only: share the topic with the replicas of this group, probing only the "
        "partitions the group assigns",
    )
    #: JSON totals written here at a clean stop (``probes.summary``); None: none written
    summary_file: str | None = setting(None, help="write the totals here as JSON at a clean stop")
    #: The ``bootstrap`` URL with its credentials, typed secret (``bootstrap_url``).
    _url: SecretStr | None = PrivateAttr(default=None)

    @field_validator("bootstrap", mode="before")
    @classmethod
    def _bootstrap(cls, v: object) -> object:
        # ``env:VAR``/``file:PATH``: a URL with a password need not be on the command line,
        # where ``ps`` shows it to every user of the host (resolved before the scheme decides)
        if isinstance(v, str) and v.startswith(("env:", "file:")):
            v = resolve_secret(v)
        if isinstance(v, str) and "://" in v:
            return _check_url(v)
        return kafka_bootstrap(v) if isinstance(v, str) else v

    @property
    def system(self) -> str:
        """The kind of broker probed (``core.echo.SYSTEMS``), from the ``bootstrap`` scheme."""
        return system_of(self.bootstrap)

    def send_queue(self) -> int:
        """Bound of a non-Kafka transport's send queue: a loss timeout's worth of messages."""
        return min(max(MIN_SEND_QUEUE, int(self.rate * self.loss_timeout)), MAX_SEND_QUEUE)

    @field_validator("rate", mode="before")
    @classmethod
    def _rate(cls, v: Any) -> float:
        rate = parse_rate(v)
        if not math.isfinite(rate):
            raise ValueError("must be a finite number of messages per second per partition")
        if rate <= 0:
            raise ValueError("must be > 0 messages per second per partition")
        if rate < MIN_RATE:
            raise ValueError(
                f"must be at least {MIN_RATE:g}/s per partition: one message per partition in "
                f"each of the stream's finest windows ({format_duration(MIN_RATE_WINDOW_S)}), "
                "or those windows have no sample"
            )
        if rate > MAX_TOTAL_RATE:
            raise ValueError(f"must be at most the probe's total limit of {MAX_TOTAL_RATE:g}/s")
        return rate

    @field_validator("topic", "echo_topic")
    @classmethod
    def _topic(cls, v: str, info: ValidationInfo) -> str:
        kafka_topic_name(v)
        if info.field_name == "echo_topic" and v == info.data.get("topic"):
            raise ValueError(
                f"must differ from topic ({v}): echo records would be read back as probe messages"
            )
        return v

    @field_validator("cluster", "probe_id")
    @classmethod
    def _label(cls, v: str, info: ValidationInfo) -> str:
        # the stream's own limits (core.labels): what the probe accepts, the stream keeps
        limit = MAX_LABEL_BYTES[LABEL_FIELDS[str(info.field_name)]]
        try:
            v.encode()
        except UnicodeEncodeError:
            raise ValueError("must be UTF-8 text (an echo record's labels are)") from None
        if label_bytes(v) > limit:
            raise ValueError(
                f"must be at most {limit} bytes of UTF-8 (got {label_bytes(v)}): the stream "
                "job drops an echo with a longer one (label_too_long)"
            )
        return label(v)

    @field_validator("size", mode="before")
    @classmethod
    def _size(cls, v: Any) -> int:
        size = parse_size_bytes(v)
        if not HEADER_BYTES <= size <= MAX_SIZE_BYTES:
            raise ValueError(f"must be between {HEADER_BYTES} and {MAX_SIZE_BYTES} bytes")
        return size

    @field_validator(
        "loss_timeout", "hiccup_interval", "shutdown_timeout", "manage_interval", mode="before"
    )
    @classmethod
    def _duration(cls, v: Any, info: ValidationInfo) -> float:
        seconds = parse_duration_s(v)
        if seconds <= 0:
            raise ValueError("must be > 0")
        if info.field_name == "loss_timeout" and seconds > MAX_LOSS_TIMEOUT_S:
            raise ValueError(
                f"must be at most {MAX_LOSS_TIMEOUT_S:,}s (about 24d): librdkafka's "
                "message.timeout.ms, which is loss_timeout + 5s, holds at most 2^31-1 ms"
            )
        return seconds

    @field_validator("duration", mode="before")
    @classmethod
    def _optional_duration(cls, v: Any) -> float | None:
        return None if v is None else parse_duration_s(v)

    @field_validator("echo_buffer")
    @classmethod
    def _buffer(cls, v: int) -> int:
        if not 1 <= v <= 10_000_000:
            raise ValueError("must be between 1 and 10,000,000 records")
        return v

    @field_validator("echo_batch")
    @classmethod
    def _batch(cls, v: int) -> int:
        if not 1 <= v <= MAX_BATCH_ECHOES:
            raise ValueError(f"must be between 1 and {MAX_BATCH_ECHOES:,} records")
        return v

    @field_validator("metrics_port")
    @classmethod
    def _port(cls, v: int) -> int:
        return tcp_port(v, zero="disables")

    @field_validator("manage_topic")
    @classmethod
    def _manage_kafka(cls, v: bool, info: ValidationInfo) -> bool:
        if v and system_of(info.data.get("bootstrap", "")) != "kafka":
            raise ValueError(
                "Kafka only: other systems' subjects, channels and queues are not managed"
            )
        return v

    @field_validator("fleet_group")
    @classmethod
    def _fleet_kafka(cls, v: str | None, info: ValidationInfo) -> str | None:
        if v is None:
            return v
        if system_of(info.data.get("bootstrap", "")) != "kafka":
            raise ValueError("Kafka only: a fleet shares a topic through a Kafka consumer group")
        if not v or len(v.encode()) > 128 or not v.isprintable():
            raise ValueError("1..128 bytes of printable characters")
        return v

    @field_validator("rebalance")
    @classmethod
    def _rebalance(cls, v: bool, info: ValidationInfo) -> bool:
        if v and not info.data.get("manage_topic"):
            raise ValueError(
                "needs manage_topic (--manage-topic): it only rebalances what it manages"
            )
        return v

    @field_validator("echo_bootstrap")
    @classmethod
    def _echo_bootstrap(cls, v: str | None, info: ValidationInfo) -> str | None:
        system = system_of(info.data.get("bootstrap", ""))
        if v is None and system != "kafka":
            raise ValueError(
                f"required when probing {system}: echo records go to a Kafka cluster "
                "(--echo-bootstrap host:port)"
            )
        if v is not None and "://" in v:
            raise ValueError("must be a Kafka host:port list: echo records go to Kafka")
        return v if v is None else kafka_bootstrap(v)

    @field_validator("nats_jetstream", "redis_streams")
    @classmethod
    def _needs_scheme(cls, v: bool, info: ValidationInfo) -> bool:
        scheme = str(info.field_name).partition("_")[0]
        if v and system_of(info.data.get("bootstrap", "")) != SCHEMES[scheme]:
            raise ValueError(f"needs a {scheme}:// bootstrap URL")
        return v

    @model_validator(mode="after")
    def _echo_default(self) -> ProbeConfig:
        if self.echo_bootstrap is None:
            object.__setattr__(self, "echo_bootstrap", self.bootstrap)
        return self

    @model_validator(mode="after")
    def _credentials_typed(self) -> ProbeConfig:
        # a URL's credentials (nats://TOKEN@, amqp://user:PASS@, ?password=) move into a
        # SecretStr; the field keeps the address as messages show it (only a URL can hold
        # any: a Kafka host:port list with credentials is refused)
        if "://" not in self.bootstrap:
            return self
        shown = redact_url(self.bootstrap)
        if shown != self.bootstrap:
            self._url = SecretStr(self.bootstrap)
            object.__setattr__(self, "bootstrap", shown)
        return self

    def bootstrap_url(self) -> str:
        """``bootstrap`` as the client connects to it, credentials and all: called where a
        transport hands it to its client library, never to show it."""
        return self._url.get_secret_value() if self._url is not None else self.bootstrap

    def client_settings(self) -> dict[str, Any]:
        """librdkafka pass-through settings with ``env:VAR`` / ``file:PATH`` secrets resolved,
        and what ``kafka_auth`` adds (aws-msk-iam: SASL_SSL, OAUTHBEARER, its token callback).

        An unset variable or an unreadable file raises ConfigError naming the key, e.g.
        ``kafka.sasl.password: cannot read file /x: No such file or directory``; the message
        never holds a secret.
        """
        from kafkautil.auth import auth_settings

        return {**resolve_secrets(self.kafka, "kafka"), **auth_settings(self.auth)}

    def clients(self) -> dict[str, dict[str, Any]]:
        """The librdkafka configuration of the probe's three clients: ``producer`` (probe
        messages), ``consumer`` (reads them back) and ``echo_producer``.

        Our latency-minded defaults come first and the user's ``kafka`` settings override them
        (``acks``, ``linger.ms``, ``fetch.wait.max.ms``, ... are theirs to tune). Only what the
        probe's guarantees rest on is pinned: the queue bounds (set by ``rate``/``loss_timeout``
        and ``echo_buffer``) and a consumer that never commits offsets (the probe writes nothing
        but its two topics).
        """
        user = self.client_settings()
        queue = min(max(100_000, int(self.rate * 64 * self.loss_timeout)), 10_000_000)
        producer = {
            "linger.ms": 0,
            "acks": "all",
            # Not idempotent: once a partition's 5 requests are in flight to a slow broker,
            # librdkafka 2.16's idempotent producer polls its socket with a 0 ms timeout until
            # one returns (rdkafka_broker.c computes the wake-up before it applies the window):
            # 0.89 of a core at 300 msgs/s and a 200 ms RTT, 0.02 without (docs/brokers.md). A
            # duplicate or reordered probe message after a retry costs nothing: the tracker
            # counts it (``duplicates``, ``out_of_order``) and measures each copy once.
            "enable.idempotence": False,
            # What a broker can take: once 5 requests wait on a connection, messages gather into
            # the next request instead of one request each. Unbounded (librdkafka's default
            # without idempotence), a freshly started 3-broker Kafka on 2 cores fell behind
            # 900 one-message requests a second: acks 8 s late after 1 s of probing, 25 s late
            # after 15 s. 5 is the Java producer's default, what the probed cluster's users run.
            "max.in.flight.requests.per.connection": 5,
            "message.timeout.ms": int(self.loss_timeout * 1000) + DELIVERY_MARGIN_MS,
            **user,
            "bootstrap.servers": self.bootstrap,
            "queue.buffering.max.messages": queue,
        }
        echo_producer = {
            "linger.ms": 5,
            "compression.type": "lz4",
            "message.timeout.ms": 300_000,
            **user,
            "bootstrap.servers": self.echo_bootstrap or self.bootstrap,
            "queue.buffering.max.messages": self.echo_buffer,
            # one echo per message: a retry after a leader change or a broker restart must not
            # write an echo twice (the stream would count it twice); idempotence needs acks=all
            "acks": "all",
            "enable.idempotence": True,
        }
        consumer = {
            # Real Kafka answers a fetch as soon as a byte arrives; this bounds how long an idle
            # fetch is held, and so what a broker that parks every fetch for the whole wait (the
            # mock, Tansu) adds to each latency. Measured on Kafka 4.1.1: no latency difference
            # from 10 to 500 ms; 500 saves ~6 points of a broker core at 30 msgs/s
            # (docs/configuration.md, "Kafka client defaults, and why").
            "fetch.wait.max.ms": 10,
            "fetch.min.bytes": 1,
            **user,
            "bootstrap.servers": self.bootstrap,
            "group.id": f"{PROBE_GROUP_PREFIX}{self.probe_id}",
            "enable.auto.commit": False,
        }
        # A fleet replica's group member (classic protocol, cooperative-sticky: a SIGKILLed
        # replica's partitions moved in 10 s, against 43 s under KIP-848's consumer protocol,
        # whose session timeout the broker sets, 45 s at least by default; docs/deploy.md).
        fleet = {
            **consumer,
            "group.id": f"{FLEET_GROUP_PREFIX}{self.fleet_group}",
            "group.protocol": "classic",
            "partition.assignment.strategy": "cooperative-sticky",
            "session.timeout.ms": FLEET_SESSION_TIMEOUT_MS,
            "heartbeat.interval.ms": FLEET_SESSION_TIMEOUT_MS // 10,
            # the group's leader sees partitions added to the topic at this refresh
            "topic.metadata.refresh.interval.ms": 10_000,
            "auto.offset.reset": "latest",
            "enable.auto.commit": False,
        }
        return {
            "producer": producer,
            "consumer": consumer,
            "echo_producer": echo_producer,
            **({"fleet": fleet} if self.fleet_group else {}),
        }
