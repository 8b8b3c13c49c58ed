"""The Redis transport: pub/sub (no publish ack) or a stream (XADD's reply is the ack).

redis-py is synchronous, so each thread has its own connection: a sender thread of the
transport's (``nines-redis-send``) pipelines what waits in its :class:`~probes.transport.Outbox`
(one round trip per batch, never one per message), and ``receive`` reads on the probe's
receiver thread. The channel (or stream key) is the probe topic. (Named ``redis_pubsub``: a
module ``redis`` here would shadow the client package.)
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
from probes.transport import NO_ACK, SINGLE, Layout, Outbox, Warnings

log = logging.getLogger("nines.probe")

#: Seconds to connect; to wait before retrying after a connection error.
CONNECT_TIMEOUT_S = 5.0
RETRY_WAIT_S = 0.2
#: Field of a stream entry that holds the payload.
FIELD = b"p"


class RedisTransport:
    """PUBLISH/SUBSCRIBE on the probe channel, or XADD/XREAD on the probe stream."""

    def __init__(self, config: ProbeConfig) -> None:
        self.url, self.key = config.bootstrap_url(), config.topic
        self.streams = config.redis_streams
        # an ack slower than the loss timeout is a loss anyway; a shorter socket timeout
        # would turn a stall the probe must measure into send errors
        self.reply_timeout_s = config.loss_timeout
        #: Bound of the stream (approximate MAXLEN): a loss timeout's worth of messages.
        self.max_len = config.send_queue()
        self._outbox = Outbox(config.send_queue())
        self._warn = Warnings()
        self._stopping = threading.Event()
        self._sender = threading.Thread(
            target=self._send_loop, name="nines-redis-send", daemon=True
        )
        self._tx: Any = None
        self._rx: Any = None
        self._pubsub: Any = None
        self._last_id = b"0-0"

    def _client(self, reply_timeout_s: float | None) -> Any:
        import redis
        from redis.backoff import NoBackoff
        from redis.retry import Retry

        # no silent retries: a retried PUBLISH/XADD could be sent twice, and an error is
        # reported (and counted) instead
        return redis.Redis.from_url(
            self.url,
            socket_connect_timeout=CONNECT_TIMEOUT_S,
            socket_timeout=reply_timeout_s,
            retry=Retry(NoBackoff(), 0),
        )

    def discover(self) -> Layout:
        """Connect and PING; ConfigError if the server does not answer."""
        import redis

        self._tx = self._client(self.reply_timeout_s)
        try:
            self._tx.ping()
        except redis.RedisError as exc:
            raise ConfigError(
                f"probe.bootstrap: cannot reach {redact_url(self.url)}: {type(exc).__name__} {exc}"
            ) from None
        self._sender.start()
        return SINGLE

    def leaders(self) -> dict[int, int] | None:
        """One server, nothing moves."""
        return dict(SINGLE.leaders)

    def open_receiver(self, partitions: list[int]) -> None:
        """Subscribe to the channel, or read the stream from its current end."""
        self._rx = self._client(self.reply_timeout_s)
        if self.streams:
            last = self._rx.xrevrange(self.key, count=1)
            self._last_id = last[0][0] if last else b"0-0"
        else:
            self._subscribe()

    def _subscribe(self) -> None:
        self._pubsub = self._rx.pubsub(ignore_subscribe_messages=True)
        self._pubsub.subscribe(self.key)

    def send(self, partition: int, seq: int, payload: bytes, report: Any) -> None:
        """Queue one message for the sender thread; BufferError when the queue is full."""
        self._outbox.put((partition, seq, payload, report))

    def _send_loop(self) -> None:
        import redis

        while not self._stopping.is_set():
            items = self._outbox.take(0.1)
            if not items:
                continue
            pipe = self._tx.pipeline(transaction=False)
            for item in items:
                if self.streams:
                    pipe.xadd(self.key, {FIELD: item[2]}, maxlen=self.max_len, approximate=True)
                else:
                    pipe.publish(self.key, item[2])
            try:
                pipe.execute()
                # XADD's reply is the entry id: stored. PUBLISH's (how many subscribers got it)
                # acknowledges nothing that outlives the connection.
                outcome = None if self.streams else NO_ACK
            except redis.RedisError as exc:
                outcome = type(exc).__name__
            for item in items:
                self._outbox.report(item, outcome)
            if outcome not in (None, NO_ACK):
                time.sleep(RETRY_WAIT_S)  # the next pipeline reconnects

    def serve_reports(self, timeout_s: float) -> None:
        """Run the reports the sender thread filed."""
        self._outbox.serve(timeout_s)

    def receive(self, timeout_s: float) -> Iterable[bytes | None] | None:
        """What arrived, as soon as something did; a lost connection is re-opened next time."""
        import redis

        try:
            if self.streams:
                return self._read_stream(timeout_s)
            return self._read_channel(timeout_s)
        except redis.RedisError as exc:
            self._warn(f"redis {redact_url(self.url)}: {type(exc).__name__}")
            if self._pubsub is not None:
                self._pubsub.close()
                self._pubsub = None
            time.sleep(timeout_s)
            return None

    def _read_channel(self, timeout_s: float) -> list[bytes] | None:
        if self._pubsub is None:
            self._subscribe()  # after a lost connection: messages meanwhile are lost, counted
        first = self._pubsub.get_message(timeout=timeout_s)
        if first is None:
            return None
        out = [first["data"]]
        while len(out) < 1000:
            m = self._pubsub.get_message(timeout=0)
            if m is None:
                break
            out.append(m["data"])
        return out

    def _read_stream(self, timeout_s: float) -> list[bytes] | None:
        got = self._rx.xread(
            {self.key: self._last_id}, count=1000, block=max(1, int(timeout_s * 1000))
        )
        if not got:
            return None
        entries = got[0][1]
        self._last_id = entries[-1][0]
        return [fields.get(FIELD) for _, fields in entries]

    def close_receiver(self) -> None:
        """Unsubscribe and stop the sender thread."""
        self._stopping.set()
        if self._pubsub is not None:
            try:
                self._pubsub.close()
            except Exception as exc:
                log.warning("redis: close failed: %s", type(exc).__name__)

    def release(self) -> None:
        """Close the connections."""
        self._stopping.set()
        if self._sender.is_alive():
            self._sender.join(1.0)
        for client in (self._tx, self._rx):
            if client is not None:
                client.close()
        self._tx = self._rx = None
