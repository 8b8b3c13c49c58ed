"""The RabbitMQ transport: publisher confirms (the broker's ack is the ack) on the probe queue.

pika is not thread-safe, so each thread has its own connection: the transport's sender thread
(``nines-amqp-send``) publishes what waits in its :class:`~probes.transport.Outbox` with
confirms, and ``receive`` consumes on the probe's receiver thread. Messages go through the
default exchange to the queue named by the probe topic, persistent and mandatory (an
unroutable message is a send error, never a silent drop). The queue must exist (durable, one
per probe: consumers of one queue share its messages).

pika's blocking channel waits for each confirm before the next publish, so the sender is
closed-loop *behind* the open-loop schedule: a backlog keeps its intended times (every stalled
message is counted from when it should have gone), but it drains one round trip per message.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable
from typing import Any

from core.config import ConfigError, redact_url
from probes.config import ProbeConfig
from probes.transport import SINGLE, Layout, Outbox, Warnings

log = logging.getLogger("nines.probe")

#: Seconds to connect; to wait before reconnecting after a lost connection.
CONNECT_TIMEOUT_S = 5.0
RETRY_WAIT_S = 0.2
#: Messages the broker may push to the receiver before the probe reads them.
PREFETCH = 10_000


class RabbitTransport:
    """Publish to the probe queue with confirms; consume it back."""

    def __init__(self, config: ProbeConfig) -> None:
        self.url, self.queue = config.bootstrap, config.topic
        self._outbox = Outbox(config.send_queue())
        self._warn = Warnings()
        # pika logs every failed connection attempt as an ERROR with a traceback; ours is one
        # line per WARN interval (``Warnings``)
        logging.getLogger("pika").setLevel(logging.CRITICAL)
        self._stopping = threading.Event()
        self._sender = threading.Thread(target=self._send_loop, name="nines-amqp-send", daemon=True)
        self._rx: Any = None
        self._arrived: list[bytes] = []

    def _connect(self) -> Any:
        import pika

        params = pika.URLParameters(self.url)
        params.socket_timeout = CONNECT_TIMEOUT_S
        params.blocked_connection_timeout = None
        return pika.BlockingConnection(params)

    def discover(self) -> Layout:
        """Connect and check that the queue exists; ConfigError naming what to fix."""
        import pika.exceptions as px

        shown = redact_url(self.url)
        try:
            conn = self._connect()
        except px.AMQPError as exc:
            raise ConfigError(
                f"probe.bootstrap: cannot connect to {shown}: {type(exc).__name__}"
            ) from None
        try:
            conn.channel().queue_declare(self.queue, passive=True)
        except px.ChannelClosedByBroker:
            raise ConfigError(
                f"probe.topic: no queue {self.queue} on {shown}: declare it (durable), "
                "one queue per probe"
            ) from None
        finally:
            if conn.is_open:
                conn.close()
        self._sender.start()
        return SINGLE

    def leaders(self) -> dict[int, int] | None:
        """One broker, nothing moves."""
        return dict(SINGLE.leaders)

    def open_receiver(self, partitions: list[int]) -> None:
        """Consume the queue (auto-ack: the probe's receipt is the arrival)."""
        self._open_rx()

    def _open_rx(self) -> None:
        self._rx = self._connect()
        ch = self._rx.channel()
        ch.basic_qos(prefetch_count=PREFETCH)
        ch.basic_consume(self.queue, self._on_message, auto_ack=True)

    def _on_message(self, _ch: Any, _method: Any, _props: Any, body: bytes) -> None:
        self._arrived.append(body)

    def send(self, partition: int, seq: int, payload: bytes, report: Any) -> None:
        """Queue one message for the sender thread; BufferError when the queue is full."""
        self._outbox.put((partition, seq, payload, report))

    def _send_loop(self) -> None:
        import pika
        import pika.exceptions as px

        props = pika.BasicProperties(delivery_mode=pika.DeliveryMode.Persistent)
        conn: Any = None
        while not self._stopping.is_set():
            if conn is None or not conn.is_open:
                try:
                    conn = self._connect()
                    ch = conn.channel()
                    ch.confirm_delivery()
                except px.AMQPError as exc:
                    self._warn(f"rabbitmq {redact_url(self.url)}: {type(exc).__name__}")
                    conn = None
                    time.sleep(RETRY_WAIT_S)
                    continue
            items = self._outbox.take(0.1)
            if not items:
                conn.process_data_events(0)  # heartbeats while idle
                continue
            for i, item in enumerate(items):
                try:
                    ch.basic_publish("", self.queue, item[2], props, mandatory=True)
                    self._outbox.report(item, None)  # confirmed
                except px.UnroutableError:
                    self._outbox.report(item, "unroutable")
                except px.NackError:
                    self._outbox.report(item, "nacked")
                except px.AMQPError as exc:
                    # the connection (or channel) is gone: the rest of the batch is not sent
                    for rest in items[i:]:
                        self._outbox.report(rest, type(exc).__name__)
                    self._warn(f"rabbitmq {redact_url(self.url)}: {type(exc).__name__}")
                    if conn.is_open:
                        conn.close()
                    conn = None
                    break
        if conn is not None and conn.is_open:
            conn.close()

    def serve_reports(self, timeout_s: float) -> None:
        """Run the reports the sender thread filed."""
        self._outbox.serve(timeout_s)

    def receive(self, timeout_s: float) -> Iterable[bytes | None] | None:
        """What arrived, as soon as something did (pika returns on the first delivery)."""
        import pika.exceptions as px

        try:
            if self._rx is None or not self._rx.is_open:
                self._open_rx()
            self._rx.process_data_events(time_limit=timeout_s)
        except px.AMQPError as exc:
            self._warn(f"rabbitmq {redact_url(self.url)}: {type(exc).__name__}")
            self._rx = None
            time.sleep(timeout_s)
        if not self._arrived:
            return None
        out, self._arrived = self._arrived, []
        return out

    def close_receiver(self) -> None:
        """Close the consumer's connection and stop the sender."""
        self._stopping.set()
        if self._rx is not None and self._rx.is_open:
            try:
                self._rx.close()
            except Exception as exc:
                log.warning("rabbitmq: close failed: %s", type(exc).__name__)

    def release(self) -> None:
        """Wait for the sender thread to close its connection."""
        self._stopping.set()
        if self._sender.is_alive():
            self._sender.join(1.0)
