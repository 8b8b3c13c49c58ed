"""The RabbitMQ transport: publisher confirms (the broker's ack is the ack) on the probe queue.

pika is not thread-safe, so each thread has its own connection: the transport's sender thread
(``nines-amqp-send``) publishes what waits in its :class:`~probes.transport.Outbox` with
confirms, and ``receive`` consumes on the probe's receiver thread. Messages go through the
default exchange to the queue named by the probe topic, persistent and mandatory (an
unroutable message is a send error, never a silent drop). The queue must exist (durable, one
per probe: consumers of one queue share its messages).

Confirms are asynchronous (pika's ``SelectConnection`` on the sender thread): publishes do not
wait for one another's confirm, so a backlog after a stall drains at once rather than one round
trip per message (pika's blocking channel waits for each confirm: tried, it turned a 10 s outage
into seconds of probe-made latency afterwards).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable
from typing import Any

from core.config import ConfigError
from core.redact import redact_url
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
        self.url, self.queue = config.bootstrap_url(), config.topic
        self._outbox = Outbox(config.send_queue())
        self._warn = Warnings()
        # pika logs every failed connection attempt as an ERROR with a traceback; ours is one
        # line per WARN interval (``Warnings``)
        logging.getLogger("pika").setLevel(logging.CRITICAL)
        self._stopping = threading.Event()
        self._sender = threading.Thread(target=self._send_loop, name="nines-amqp-send", daemon=True)
        self._rx: Any = None
        self._arrived: list[bytes] = []
        self._publisher: Publisher | None = None

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
        publisher = self._publisher
        if publisher is not None:
            publisher.wake()

    def _send_loop(self) -> None:
        """Publish with confirms, reconnecting after a lost connection, until stopped."""
        while not self._stopping.is_set():
            self._publisher = Publisher(self)
            self._publisher.run()  # returns when its connection closes
            self._publisher = None
            if not self._stopping.is_set():
                time.sleep(RETRY_WAIT_S)

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
        publisher = self._publisher
        if publisher is not None:
            publisher.close()
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


class Publisher:
    """One connection's worth of publishing with asynchronous publisher confirms.

    Runs pika's ioloop on the transport's sender thread; other threads only ``wake`` it or
    ``close`` it (``add_callback_threadsafe``). Messages awaiting a confirm are bounded by the
    send queue's capacity: beyond, they wait in the outbox (and the sender sees BufferError).
    """

    def __init__(self, transport: RabbitTransport) -> None:
        self.t = transport
        self.conn: Any = None
        self.channel: Any = None
        self._channel: Any = None  # open, confirms not yet on
        self.tag = 0
        #: delivery tag → message, in publish order, until its confirm (or the connection) ends
        self.pending: dict[int, Any] = {}
        #: delivery tags the broker returned (unroutable): their ack is no delivery
        self.returned: set[int] = set()

    def run(self) -> None:
        import pika

        params = pika.URLParameters(self.t.url)
        params.socket_timeout = CONNECT_TIMEOUT_S
        self.conn = pika.SelectConnection(
            params,
            on_open_callback=self._opened,
            on_open_error_callback=self._failed,
            on_close_callback=self._closed,
        )
        self.conn.ioloop.start()

    def wake(self) -> None:
        """Publish what waits (from any thread)."""
        conn = self.conn
        if conn is not None and self.channel is not None:
            conn.ioloop.add_callback_threadsafe(self._pump)

    def close(self) -> None:
        """Close the connection (from any thread); ``run`` returns."""
        conn = self.conn
        if conn is not None:
            conn.ioloop.add_callback_threadsafe(
                lambda: conn.close() if conn.is_open else conn.ioloop.stop()
            )

    def _opened(self, conn: Any) -> None:
        conn.channel(on_open_callback=self._channel_opened)

    def _channel_opened(self, channel: Any) -> None:
        channel.add_on_close_callback(self._channel_closed)
        channel.add_on_return_callback(self._returned)
        channel.confirm_delivery(ack_nack_callback=self._confirmed, callback=self._ready)
        self._channel = channel

    def _ready(self, _frame: Any) -> None:
        self.channel = self._channel
        self._pump()
        self._tick()

    def _tick(self) -> None:
        """Pump now and then too: a wake-up may come before the channel was ready."""
        if self.conn is None or not self.conn.is_open:
            return
        if self.t._stopping.is_set():  # stopped while this connection was opening
            self.conn.close()
            return
        self._pump()
        self.conn.ioloop.call_later(0.1, self._tick)

    def _pump(self) -> None:
        import pika

        if self.channel is None or not self.channel.is_open:
            return
        room = self.t._outbox.capacity - len(self.pending)
        if room <= 0:
            return
        for item in self.t._outbox.take(0, most=min(room, 1000)):
            self.tag += 1
            self.pending[self.tag] = item
            props = pika.BasicProperties(
                delivery_mode=pika.DeliveryMode.Persistent, message_id=str(self.tag)
            )
            self.channel.basic_publish("", self.t.queue, item[2], props, mandatory=True)
        if not self.t._outbox.empty() and len(self.pending) < self.t._outbox.capacity:
            self.conn.ioloop.add_callback_threadsafe(self._pump)

    def _returned(self, _channel: Any, _method: Any, props: Any, _body: bytes) -> None:
        if props.message_id and props.message_id.isdigit():
            self.returned.add(int(props.message_id))

    def _confirmed(self, frame: Any) -> None:
        import pika

        method = frame.method
        acked = isinstance(method, pika.spec.Basic.Ack)
        tags = (
            [t for t in self.pending if t <= method.delivery_tag]
            if method.multiple
            else [method.delivery_tag]
        )
        for tag in tags:
            item = self.pending.pop(tag, None)
            if item is None:
                continue
            if tag in self.returned:
                self.returned.discard(tag)
                self.t._outbox.report(item, "unroutable")
            else:
                self.t._outbox.report(item, None if acked else "nacked")  # the broker's confirm

    def _fail_pending(self, reason: Any) -> None:
        """Messages sent on a connection that ended unconfirmed: send errors."""
        name = type(reason).__name__
        for item in self.pending.values():
            self.t._outbox.report(item, name)
        self.pending.clear()
        self.returned.clear()

    def _channel_closed(self, _channel: Any, reason: Any) -> None:
        self.channel = None
        self._fail_pending(reason)
        if self.conn is not None and self.conn.is_open:
            self.conn.close()

    def _failed(self, conn: Any, error: Any) -> None:
        self.t._warn(f"rabbitmq {redact_url(self.t.url)}: {type(error).__name__}")
        conn.ioloop.stop()

    def _closed(self, conn: Any, reason: Any) -> None:
        self.channel = None
        self._fail_pending(reason)
        if not self.t._stopping.is_set():
            self.t._warn(f"rabbitmq {redact_url(self.t.url)}: {type(reason).__name__}")
        conn.ioloop.stop()
