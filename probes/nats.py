"""The NATS transport: core NATS (no publish ack) or JetStream (the PubAck is the ack).

nats-py is asyncio: its client lives on an event loop thread owned by the transport
(``nines-nats``); the probe's threads reach it through an :class:`~probes.transport.Outbox`
(sends and their reports) and a bounded queue of arrivals. The subject is the probe topic;
JetStream needs a stream that captures it (found by subject, never created here).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import threading
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

from core.config import ConfigError
from core.redact import redact_url
from probes.config import ProbeConfig
from probes.transport import NO_ACK, SINGLE, Layout, Outbox, Outgoing, Warnings, drain

log = logging.getLogger("nines.probe")

#: Seconds to connect at start; between reconnect attempts while the server is away.
CONNECT_TIMEOUT_S = 5.0
RECONNECT_WAIT_S = 0.2
#: Arrivals waiting for the receiver thread; beyond it they are dropped, counted and logged
#: (and the tracker declares those messages lost at their timeout).
MAX_ARRIVALS = 100_000


class NatsTransport:
    """Publish on the probe subject and subscribe to it, from a client on its own loop thread."""

    def __init__(self, config: ProbeConfig) -> None:
        self.url, self.subject = config.bootstrap_url(), config.topic
        self.jetstream = config.nats_jetstream
        self.ack_timeout_s = config.loss_timeout
        self._outbox = Outbox(config.send_queue())
        self._warn = Warnings()
        self._arrivals: queue.Queue[bytes] = queue.Queue(MAX_ARRIVALS)
        #: Arrivals dropped because the receiver thread fell ``MAX_ARRIVALS`` behind.
        self.arrivals_dropped = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="nines-nats", daemon=True
        )
        self._thread.start()
        self._nc: Any = None
        self._js: Any = None
        self._stream: str | None = None
        self._sub: Any = None
        self._wake: asyncio.Event | None = None
        self._pump: Any = None

    def _call(self, coro: Any, timeout_s: float) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout_s)

    async def _error(self, exc: Exception) -> None:
        self._warn(f"nats {redact_url(self.url)}: {type(exc).__name__}: {exc}")

    async def _connect(self) -> None:
        import nats

        # nats-py retries its first connection for ever when reconnects are unlimited: check
        # that the server answers at all, so that a wrong URL is an error now
        url = urlsplit(self.url)
        _, writer = await asyncio.wait_for(
            asyncio.open_connection(url.hostname, url.port or 4222), CONNECT_TIMEOUT_S
        )
        writer.close()
        self._nc = await nats.connect(
            servers=[self.url],
            connect_timeout=CONNECT_TIMEOUT_S,
            allow_reconnect=True,
            max_reconnect_attempts=-1,
            reconnect_time_wait=RECONNECT_WAIT_S,
            error_cb=self._error,
        )
        if self.jetstream:
            self._js = self._nc.jetstream()
            self._stream = await self._js.find_stream_name_by_subject(self.subject)
        self._wake = asyncio.Event()
        self._pump = asyncio.ensure_future(self._send_loop())

    def discover(self) -> Layout:
        """Connect (and find the JetStream stream); ConfigError naming what to fix."""
        shown = redact_url(self.url)
        try:
            self._call(self._connect(), CONNECT_TIMEOUT_S * 2)
        except Exception as exc:
            if self._nc is not None and self.jetstream:
                raise ConfigError(
                    f"probe.topic: no JetStream stream on {shown} captures subject "
                    f"{self.subject} (create one, e.g. `nats stream add --subjects "
                    f"{self.subject}`): {type(exc).__name__}"
                ) from None
            raise ConfigError(
                f"probe.bootstrap: cannot connect to {shown}: {type(exc).__name__} {exc}"
            ) from None
        return SINGLE

    def leaders(self) -> dict[int, int] | None:
        """One server, nothing moves."""
        return dict(SINGLE.leaders)

    def open_receiver(self, partitions: list[int]) -> None:
        """Subscribe from now on: core NATS, or a JetStream ordered consumer of new messages."""
        self._call(self._subscribe(), CONNECT_TIMEOUT_S * 2)

    async def _subscribe(self) -> None:
        if self.jetstream:
            from nats.js.api import DeliverPolicy

            self._sub = await self._js.subscribe(
                self.subject,
                cb=self._arrived,
                stream=self._stream,
                ordered_consumer=True,
                deliver_policy=DeliverPolicy.NEW,
            )
        else:
            self._sub = await self._nc.subscribe(self.subject, cb=self._arrived)

    async def _arrived(self, msg: Any) -> None:
        try:
            self._arrivals.put_nowait(msg.data)
        except queue.Full:
            self.arrivals_dropped += 1
            if self.arrivals_dropped == 1 or self.arrivals_dropped % 10_000 == 0:
                log.warning(
                    "nats: %d arrivals dropped: the receiver fell behind", self.arrivals_dropped
                )

    def send(self, partition: int, seq: int, payload: bytes, report: Any) -> None:
        """Queue one message for the loop thread; BufferError when the queue is full."""
        self._outbox.put((partition, seq, payload, report))
        assert self._wake is not None
        self._loop.call_soon_threadsafe(self._wake.set)

    async def _send_loop(self) -> None:
        """Publish what waits; JetStream publishes run concurrently, at most the queue's bound."""
        assert self._wake is not None
        in_flight = asyncio.Semaphore(self._outbox.capacity)
        tasks: set[asyncio.Task[None]] = set()
        while True:
            await self._wake.wait()
            self._wake.clear()
            for item in self._outbox.take(0):
                if self.jetstream:
                    await in_flight.acquire()
                    task = asyncio.ensure_future(self._publish_js(item, in_flight))
                    tasks.add(task)
                    task.add_done_callback(tasks.discard)
                    continue
                try:
                    await self._nc.publish(self.subject, item[2])
                    self._outbox.report(item, NO_ACK)  # core NATS acknowledges nothing
                except Exception as exc:
                    self._outbox.report(item, type(exc).__name__)
            if not self._outbox.empty():
                self._wake.set()

    async def _publish_js(self, item: Outgoing, in_flight: asyncio.Semaphore) -> None:
        try:
            await self._js.publish(
                self.subject, item[2], timeout=self.ack_timeout_s, stream=self._stream
            )
            self._outbox.report(item, None)  # the PubAck: stored by the stream
        except Exception as exc:
            self._outbox.report(item, type(exc).__name__)
        finally:
            in_flight.release()

    def serve_reports(self, timeout_s: float) -> None:
        """Run the reports the loop thread filed."""
        self._outbox.serve(timeout_s)

    def receive(self, timeout_s: float) -> Iterable[bytes | None] | None:
        """The payloads delivered so far, as soon as one is."""
        return drain(self._arrivals, timeout_s)

    def close_receiver(self) -> None:
        """Unsubscribe (bounded: the server may be away)."""
        if self._sub is not None:
            try:
                self._call(self._sub.unsubscribe(), 2.0)
            except Exception as exc:
                log.warning("nats: unsubscribe failed: %s", type(exc).__name__)

    def release(self) -> None:
        """Close the connection and end the loop thread."""
        try:
            self._call(self._close(), 3.0)
        except Exception as exc:
            log.warning("nats: close failed: %s", type(exc).__name__)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(2.0)

    async def _close(self) -> None:
        if self._pump is not None:
            self._pump.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._pump
        if self._nc is not None:
            await self._nc.close()
