"""The echo publisher: one echo record per probe message, and one hiccup record per interval.

Probing never waits for the echo cluster: the sink's buffer is bounded (``echo_buffer``), and a
record that does not fit, or whose delivery fails, is dropped, counted in ``dropped`` and
logged (at most once per ``WARN_EVERY_S``), never lost silently.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, Protocol

from core.echo import Echo, Hiccup, encode_record

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

    def _done(self, err: Any, _msg: Any) -> None:
        if err is None:
            self.published += 1
        else:
            self._dropped(err.str())

    def _dropped(self, why: str) -> None:
        self.dropped += 1
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

    @property
    def buffered(self) -> int:
        """Records waiting for the echo cluster."""
        return self._buffered_at_release if self.sink is None else len(self.sink)

    def release(self) -> None:
        """Drop the sink now (see ``ProbeAgent.stop``); ``buffered`` keeps its last count."""
        if self.sink is not None:
            self._buffered_at_release = len(self.sink)
            self.sink = None
