"""The embedded Kafka-protocol test cluster (librdkafka mock) and its fault injection.

``EmbeddedBroker`` runs ``nines broker`` in its own process; ``BrokerConfig`` is its config.
Nothing here imports a Kafka client: the mock is bound with ctypes in ``mock`` (server side).
"""

from testbroker.config import BrokerConfig
from testbroker.control import ControlError, ReadyInfo
from testbroker.process import BrokerStartError, EmbeddedBroker

__all__ = ["BrokerConfig", "BrokerStartError", "ControlError", "EmbeddedBroker", "ReadyInfo"]
