"""The echo publisher: one echo record per probe message, and one hiccup record per interval.

Probing never waits for the echo cluster: the sink's buffer is bounded (``echo_buffer``), and a
record that does not fit, or whose delivery fails, is dropped, counted in ``dropped`` and
logged (at most once per ``WARN_EVERY_S``), never lost silently. ``EchoPublisher`` writes
schema v1 (one JSON record per Kafka message); ``BatchingEchoPublisher`` writes format v2
(``core.echo_v2``: many records per message), counting drops and deliveries per record.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any, Protocol

from core.echo import Echo, Hiccup, encode_record
from core.echo_v2 import MAX_BATCH_ECHOES, encode_batch
from kafkautil.acls import lacks
from probes.config import ProbeConfig

log = logging.getLogger("nines.probe")

#: Seconds between two warnings about dropped echo records.
WARN_EVERY_S = 10.0


class EchoSink(Protocol):
    """A bounded, asynchronous producer of the echo topic (a confluent-kafka ``Producer``)."""

    def produce(
        self, topic: str, *, key: str, value: bytes, on_delivery: Callable[[Any, Any], None]
    ) -> None:
        """Queue one record; BufferError when the buffer is full."""
        ...

    def poll(self, timeout: float) -> int:
        """Serve delivery reports."""
        ...

    def flush(self, timeout: float) -> int:
        """Deliver what is buffered, waiting at most ``timeout``; what is left."""
        ...

    def __len__(self) -> int:
        """Records buffered, not yet delivered."""
        ...


class EchoPublisher:
    """Encodes records with the echo schema and hands them to the sink, keyed by probe id."""

    def __init__(self, topic: str, key: str) -> None:
        self.topic, self.key = topic, key
        self.sink: EchoSink | None = None
        self.dropped = 0
        self.published = 0
        self._warned_at = 0.0
        self._buffered_at_release = 0

    def open(self, sink: EchoSink) -> None:
        """Publish through ``sink`` from now on."""
        self.sink = sink

    def publish(self, record: Echo | Hiccup) -> None:
        """Hand a record to the sink; when its bounded buffer is full, count the drop."""
        try:
            self.sink.produce(  # type: ignore[union-attr]
                self.topic, key=self.key, value=encode_record(record), on_delivery=self._done
            )
        except BufferError:
            self._dropped("echo buffer full")
        except Exception as exc:  # refused at once (e.g. not authorised): a drop, never a crash
            self._dropped(self._why(exc))

    def _done(self, err: Any, _msg: Any) -> None:
        if err is None:
            self.published += 1
        else:
            self._dropped(self._why(err))

    def _why(self, err: Any) -> str:
        """A failed delivery's or a refused produce's reason (``err``: a KafkaError, or the
        exception carrying one), naming the missing right when it is an authorization one."""
        error = err.args[0] if isinstance(err, Exception) and err.args else err
        name = getattr(error, "name", None)
        text = error.str() if hasattr(error, "str") else str(err)
        if not callable(name):
            return text
        why = lacks(name(), "WRITE", "TOPIC", self.topic)
        return text if why == name() else why

    def _dropped(self, why: str, n: int = 1) -> None:
        self.dropped += n
        now = time.monotonic()
        if now - self._warned_at > WARN_EVERY_S:
            self._warned_at = now
            log.warning(
                "dropping echo records (%s): %d dropped so far; probing continues",
                why,
                self.dropped,
            )

    def poll(self) -> None:
        """Serve the sink's delivery reports that are due (never waits)."""
        self.sink.poll(0)  # type: ignore[union-attr]

    def flush(self, timeout_s: float) -> None:
        """Deliver what is buffered, waiting at most ``timeout_s``."""
        self.sink.flush(timeout_s)  # type: ignore[union-attr]

    def give_up(self) -> int:
        """At stop, after the last flush: what the echo cluster has not taken is purged from the
        sink and counted dropped (by its delivery reports); returns the records still in flight
        to it (sent, not acknowledged: they may yet be written, so they are neither)."""
        if self.sink is None:
            return 0
        purge = getattr(self.sink, "purge", None)
        if purge is not None:
            purge(in_queue=True, in_flight=False, blocking=True)
        self.sink.poll(0)
        return len(self.sink)

    @property
    def buffered(self) -> int:
        """Records waiting for the echo cluster."""
        return self._buffered_at_release if self.sink is None else len(self.sink)

    def release(self) -> None:
        """Drop the sink now (see ``ProbeAgent.stop``); ``buffered`` keeps its last count."""
        if self.sink is not None:
            self._buffered_at_release = len(self.sink)
            self.sink = None


#: A v2 batch waits at most this long for more records (the housekeeper also flushes it).
LINGER_S = 0.1
#: Echo messages in flight to the echo cluster at once; more wait in the publisher. Below
#: librdkafka's window of 5 requests per partition for an idempotent producer: once that window
#: is full, librdkafka 2.16 polls its socket with a 0 ms timeout until a response returns, a
#: core's worth of CPU while the echo cluster is slow (docs/brokers.md). All of a probe's
#: echoes share one key, so one partition.
MAX_IN_FLIGHT = 4
#: Records of one echo message when pending batches are merged (v2 echoes are ~73 bytes: about
#: 365 KB, within librdkafka's default 1 MB message.max.bytes).
MERGED_ECHOES = 5_000


class BatchingEchoPublisher(EchoPublisher):
    """Collects records into v2 batches of at most ``batch_echoes``, sent when full, when a
    publish finds the oldest ``linger_s`` old, and on every ``poll`` (the housekeeper's 100 ms).

    The sink then queues a few messages instead of one per record (1,000 produce calls a
    second at 1,000 msgs/s become about 10). ``capacity`` (``echo_buffer``) bounds the records
    queued in the sink; a batch that does not fit, or fails, counts each of its records dropped.
    At most ``MAX_IN_FLIGHT`` messages are in the sink at once; closed batches wait here
    (within ``capacity``) and are merged while they wait.
    """

    def __init__(
        self,
        topic: str,
        key: str,
        *,
        capacity: int,
        batch_echoes: int = 1000,
        linger_s: float = LINGER_S,
    ) -> None:
        super().__init__(topic, key)
        if not 1 <= batch_echoes <= MAX_BATCH_ECHOES:
            raise ValueError(f"batch_echoes must be between 1 and {MAX_BATCH_ECHOES}")
        self.capacity, self.batch_echoes, self.linger_s = capacity, batch_echoes, linger_s
        self._batch: list[Echo | Hiccup] = []
        self._first_at = 0.0
        #: The batch's probe and cluster, and its echoes' topic (v2 batches one source).
        self._source: tuple[str, str] = ("", "")
        self._topic: str | None = None
        #: Records handed to the sink or waiting for it (``_pending``), not yet delivered or
        #: failed: what ``capacity`` bounds.
        self._in_sink = 0
        #: Closed batches waiting for a place in flight: (source, topic, records), oldest first.
        self._pending: deque[tuple[tuple[str, str], str | None, list[Echo | Hiccup]]] = deque()
        #: Echo messages handed to the sink and not yet reported (at most ``MAX_IN_FLIGHT``).
        self._messages_in_sink = 0
        self._lock = threading.Lock()

    def publish(self, record: Echo | Hiccup) -> None:
        """Add a record to the batch; send the batch when it is full, old, or of another key."""
        with self._lock:
            topic = record.topic if isinstance(record, Echo) else None
            if self._batch and (
                (record.probe, record.cluster) != self._source
                or (topic is not None and self._topic not in (None, topic))
            ):
                self._send_locked()
            batch = self._batch
            if not batch:
                self._first_at = time.monotonic()
                self._source, self._topic = (record.probe, record.cluster), None
            if topic is not None:
                self._topic = topic
            batch.append(record)
            if (
                len(batch) >= self.batch_echoes
                or time.monotonic() - self._first_at >= self.linger_s
            ):
                self._send_locked()

    def _send_locked(self) -> None:
        """Close the batch: queue it for the sink, and hand the sink what fits in flight."""
        batch, self._batch = self._batch, []
        if batch:
            n = len(batch)
            if self._in_sink + n > self.capacity:
                self._dropped("echo buffer full", n)
            else:
                self._in_sink += n
                self._pending.append((self._source, self._topic, batch))
        self._drain_locked()

    def _drain_locked(self) -> None:
        """Produce pending batches while fewer than ``MAX_IN_FLIGHT`` messages are in flight;
        consecutive batches of one source are merged, up to ``MERGED_ECHOES`` records, so a
        slow echo cluster gets fewer, larger messages rather than a longer queue."""
        pending = self._pending
        while pending and self._messages_in_sink < MAX_IN_FLIGHT:
            source, topic, records = pending.popleft()
            while (
                pending
                and pending[0][0] == source
                and (pending[0][1] is None or topic is None or pending[0][1] == topic)
                and len(records) + len(pending[0][2]) <= MERGED_ECHOES
            ):
                _, other, more = pending.popleft()
                topic, records = topic or other, records + more
            n = len(records)
            try:
                self.sink.produce(  # type: ignore[union-attr]
                    self.topic,
                    key=self.key,
                    value=encode_batch(records),
                    on_delivery=functools.partial(self._batch_done, n),
                )
            except BufferError:
                self._in_sink -= n
                self._dropped("echo buffer full", n)
                continue
            except Exception as exc:  # refused at once (e.g. not authorised): a drop
                self._in_sink -= n
                self._dropped(self._why(exc), n)
                continue
            self._messages_in_sink += 1

    def _batch_done(self, n: int, err: Any, _msg: Any) -> None:
        with self._lock:
            self._in_sink -= n
            self._messages_in_sink -= 1
            # a place in flight is free: the next pending batch takes it now, not at the next
            # poll (this runs inside the sink's poll, on the thread that polls it)
            if self.sink is not None:
                self._drain_locked()
        if err is None:
            self.published += n
        else:
            self._dropped(self._why(err), n)

    def send(self) -> None:
        """Hand the batch so far to the sink now."""
        with self._lock:
            self._send_locked()

    def poll(self) -> None:
        """Send the batch so far and serve the sink's delivery reports (never waits).

        The agent's housekeeper calls this every 100 ms, so no record waits much longer even
        when no publish comes to find its batch old.
        """
        self.send()
        super().poll()

    def flush(self, timeout_s: float) -> None:
        """Send the batch so far, then deliver what is buffered, waiting at most ``timeout_s``
        (pending batches go out as earlier ones are reported, within the same wait)."""
        deadline = time.monotonic() + timeout_s
        self.send()
        while self._pending and time.monotonic() < deadline:
            self.sink.poll(min(0.05, max(0.0, deadline - time.monotonic())))  # type: ignore[union-attr]
        super().flush(max(0.0, deadline - time.monotonic()))

    def give_up(self) -> int:
        """At stop, after the last flush: the batch and the batches waiting for a place in
        flight are counted dropped, then the sink's queue as in :meth:`EchoPublisher.give_up`;
        the records still in flight to the echo cluster (neither)."""
        with self._lock:
            waiting = [r for _, _, r in self._pending]
            n = len(self._batch) + sum(len(r) for r in waiting)
            self._in_sink -= sum(len(r) for r in waiting)
            self._batch, self._pending = [], deque()
        if n:
            self._dropped("not taken by the echo cluster before the stop", n)
        super().give_up()
        return self._in_sink

    @property
    def buffered(self) -> int:
        """Records waiting for the echo cluster: in the batch, and in the sink."""
        return len(self._batch) + (
            self._buffered_at_release if self.sink is None else self._in_sink
        )

    def release(self) -> None:
        """Drop the sink now; ``buffered`` keeps its last count."""
        if self.sink is not None:
            self._buffered_at_release = self._in_sink
            self.sink = None


def publisher_for(config: ProbeConfig) -> EchoPublisher:
    """The publisher of the configured ``echo_format``."""
    if config.echo_format == "v2":
        return BatchingEchoPublisher(
            config.echo_topic,
            config.probe_id,
            capacity=config.echo_buffer,
            batch_echoes=config.echo_batch,
        )
    return EchoPublisher(config.echo_topic, config.probe_id)
