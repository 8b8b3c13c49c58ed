"""The embedded Kafka-protocol test cluster (librdkafka mock, or Tansu) and its fault injection.

``EmbeddedBroker`` runs ``nines broker`` in its own process; ``BrokerConfig`` is its config.
The mock is bound with ctypes in ``mock`` (server side); ``tansu`` runs the Tansu binary and
creates its topics with confluent-kafka's admin client, as any Kafka client would.
"""

from testbroker.config import BrokerConfig
from testbroker.control import ControlError, ReadyInfo
from testbroker.process import BrokerStartError, EmbeddedBroker

__all__ = ["BrokerConfig", "BrokerStartError", "ControlError", "EmbeddedBroker", "ReadyInfo"]
