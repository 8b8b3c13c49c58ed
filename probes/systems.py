"""The transport of each probed system, chosen by the URL scheme of ``--bootstrap``.

The one module that knows every system's transport; each imports only the shared pieces of
``probes.transport``, and is imported here only when its system is probed (its client library
is not loaded otherwise).
"""

from __future__ import annotations

from probes.config import ProbeConfig
from probes.transport import Transport


def open_transport(config: ProbeConfig) -> Transport:
    """The transport of the system ``--bootstrap`` names (its URL scheme; none: Kafka)."""
    system = config.system
    if system == "nats":
        from probes.nats import NatsTransport

        return NatsTransport(config)
    if system == "redis":
        from probes.redis_pubsub import RedisTransport

        return RedisTransport(config)
    if system == "rabbitmq":
        from probes.rabbitmq import RabbitTransport

        return RabbitTransport(config)
    from probes.kafka import KafkaTransport

    return KafkaTransport(config)
