"""The Kafka transport: librdkafka's producer and consumer of the probe topic; the echo producer.

The only probe module that knows Kafka; the rest reaches it through ``probes.transport.Transport``.
Topic metadata comes from :mod:`kafkautil`, shared with the stream job's pre-flight.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from kafkautil import ConnectFailures, current_leaders, describe_topic, list_offsets
from kafkautil.acls import lacks
from kafkautil.auth import note_client_log
from probes.client_stats import CLIENT_STATS
from probes.config import ProbeConfig
from probes.transport import AckReport, Layout

if TYPE_CHECKING:
    from kafkautil.admin import TopicAdmin

#: Seconds to wait for the cluster's metadata at start, and for a leader refresh.
DISCOVER_TIMEOUT_S = 5.0
REFRESH_TIMEOUT_S = 1.0
#: Seconds an admin call may take before it counts as refused, and a management survey (the
#: housekeeping thread waits for that one).
ADMIN_TIMEOUT_S = 10.0
SURVEY_TIMEOUT_S = 2.0
#: Seconds to wait for a partition's log end, where reading it back starts.
WATERMARK_TIMEOUT_S = 5.0

#: Where librdkafka's own lines go: the probe's Python log, at DEBUG. Its default writes them
#: to stderr, about 100 lines (one per reconnect, per client) before a probe pointed at a closed
#: port gives its one-line error; what they say the probe reports itself (that error, its
#: send errors, loss and the NinesProbeSendErrors alert).
LIBRDKAFKA_LOGGER = "nines.probe.librdkafka"

log = logging.getLogger("nines.probe")


class LibrdkafkaLog:
    """confluent-kafka's ``logger``: librdkafka's lines into :data:`LIBRDKAFKA_LOGGER` at DEBUG.

    confluent-kafka serves them from the client's ``poll``; a client closed before its next
    poll (a failed start) drops them, never printing them.
    """

    def __init__(self) -> None:
        self._log = logging.getLogger(LIBRDKAFKA_LOGGER)

    def log(self, level: int, fmt: str, *args: object) -> None:
        """A librdkafka line (``level`` is its syslog level, mapped by confluent-kafka); a
        failed OIDC token request is counted (``fmt`` is ``facility [client] line``)."""
        if len(args) == 3:
            note_client_log(level, str(args[0]), str(args[2]))
        self._log.debug(fmt, *args)


def quiet(settings: dict[str, Any]) -> dict[str, Any]:
    """``settings`` with librdkafka's lines routed to the probe's log instead of stderr."""
    return {**settings, "logger": LibrdkafkaLog()}


def watched(clients: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The probe's client settings, each reporting librdkafka's statistics to the probe's
    /metrics under its own name (``producer``, ``consumer``, ``echo_producer``)."""
    return {name: {**conf, **CLIENT_STATS.settings(name)} for name, conf in clients.items()}


class ReceiveErrors:
    """Authorization failures of the consumers that read probe messages back, by error name:
    counted (``nines_probe_receive_errors_total``) and logged once per name, naming the
    missing right. Reading back stops while one lasts; sending goes on, and what is not read
    back is counted lost at its timeout."""

    def __init__(self, topic: str, group: str) -> None:
        self.topic, self.group = topic, group
        #: The group right a refusal means: Describe (FindCoordinator) for a consumer that only
        #: assigns; Read on the fleet's group once a replica joins it (``open_group``).
        self.group_right = "DESCRIBE"
        self.counts: dict[str, int] = {}

    def joined(self, group: str) -> None:
        """The consumer joins ``group`` (a fleet's): a group refusal now means Read on it."""
        self.group, self.group_right = group, "READ"

    def __call__(self, err: Any) -> None:
        name = err.name()
        if not name.endswith("_AUTHORIZATION_FAILED"):
            return  # a broker down or moving: loss and the leader gauges tell it
        if name not in self.counts:
            if name == "GROUP_AUTHORIZATION_FAILED":
                why = lacks(name, self.group_right, "GROUP", self.group)
            else:
                why = lacks(name, "READ", "TOPIC", self.topic)
            log.warning("reading %s back refused: %s (the probe goes on)", self.topic, why)
        self.counts[name] = self.counts.get(name, 0) + 1


class KafkaTransport:
    """Probe messages through one producer (acks served by ``serve_reports``) and one consumer."""

    def __init__(self, config: ProbeConfig) -> None:
        from confluent_kafka import Producer

        self.topic, self.bootstrap = config.topic, config.bootstrap
        self._clients = watched(config.clients())
        self._failures = ConnectFailures()
        self._producer: Any = Producer(
            {**quiet(self._clients["producer"]), "error_cb": self._failures}
        )
        self._consumer: Any = None
        #: A fleet replica's consumer outside the group, for log ends (``open_group``).
        self._offsets: Any = None
        self._closing = False
        #: Fleet partitions assigned at the log end, waiting for their looked-up end (reading
        #: is moved there before the first send), and the lookups' answers for the receive
        #: thread: (partitions, partition → log end).
        self._looking: set[int] = set()
        self._ends: queue.SimpleQueue[tuple[list[int], dict[int, int]]] = queue.SimpleQueue()
        self._assigned: Callable[[list[int]], object] | None = None
        #: The consumers of partitions added while probing (``add_receiver``).
        self._grown: list[KafkaReceiver] = []
        self.receive_errors = ReceiveErrors(self.topic, self._clients["consumer"]["group.id"])

    def discover(self) -> Layout:
        """The probe topic's partitions, leaders and the cluster's brokers."""
        found = describe_topic(
            self._producer,
            self.topic,
            bootstrap=self.bootstrap,
            field="topic",
            hint="create it with one partition per broker",
            timeout_s=DISCOVER_TIMEOUT_S,
            failures=self._failures,
        )
        return Layout(found.leaders, found.brokers)

    def leaders(self) -> dict[int, int] | None:
        """Partition → leader now, or None."""
        return current_leaders(self._producer, self.topic, REFRESH_TIMEOUT_S)

    def open_receiver(self, partitions: list[int]) -> None:
        """Assign ``partitions`` at their log ends (no group, no commits).

        A partition whose log end is not known within ``WATERMARK_TIMEOUT_S`` (its leader is
        slow or down) is probed anyway, read back from where the consumer finds the log end
        once the leader answers: its messages sent before then are counted lost, never absent.
        """
        self._consumer = self._reader(partitions, unknown_ok=True)

    def open_group(
        self,
        assigned: Callable[[list[int]], object],
        revoked: Callable[[list[int]], None],
        leaders: Callable[[], dict[int, int]],
    ) -> None:
        """Join the fleet's consumer group on the probe topic (``fleet_group``) instead of
        assigning partitions: ``assigned`` and ``revoked`` are called from the receive thread's
        poll, with the group's changes (cooperative: only the partitions that move).

        A partition is read from its log end, looked up before any send (a second consumer,
        outside the group, asks, on a thread of its own); the receive thread moves reading to
        that end, then hands the partition to ``assigned``: no message of this replica's is
        sent before where reading starts, and a lookup that waits on a stalled leader never
        holds the replica's other partitions (their arrivals stamped late: the CTRL+Z test on
        a fleet found it). ``revoked`` runs before the consumer lets the partitions go, so a
        message that arrives before the revocation completes is received, and none is read by
        two replicas.
        """
        from confluent_kafka import OFFSET_END, Consumer, TopicPartition

        self._offsets = Consumer(quiet(self._clients["consumer"]))
        consumer = Consumer(quiet(self._clients["fleet"]))
        self.receive_errors.joined(self._clients["fleet"]["group.id"])
        self._assigned = assigned

        def look_up(ps: list[int]) -> None:
            try:
                ends = log_ends(self._offsets, self.topic, ps, leaders())
            except Exception as exc:  # probed anyway, from where the consumer finds the end
                log.warning("fleet: cannot find the log end of partitions %s: %s", ps, exc)
                ends = {}
            self._ends.put((ps, ends))

        def on_assign(c: Any, tps: list[Any]) -> None:
            if self._closing:  # a rebalance while leaving: nothing more is probed
                return
            ps = sorted(tp.partition for tp in tps)
            c.incremental_assign([TopicPartition(self.topic, p, OFFSET_END) for p in ps])
            self._looking.update(ps)
            threading.Thread(
                target=look_up, args=(ps,), name="nines-fleet-ends", daemon=True
            ).start()

        def on_revoke(c: Any, tps: list[Any]) -> None:
            ps = sorted(tp.partition for tp in tps)
            self._looking.difference_update(ps)
            revoked(ps)
            c.incremental_unassign(tps)

        consumer.subscribe(
            [self.topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_revoke
        )
        self._consumer = consumer

    def add_receiver(self, partitions: list[int]) -> KafkaReceiver:
        """A consumer of its own for ``partitions``, added while probing, from their high
        watermarks; the caller polls it on a thread of its own.

        Not the probe's first consumer: while a joining broker took its first partition, that
        handle's metadata-bound calls (``get_watermark_offsets``, ``offsets_for_times``,
        ``list_topics``) waited far past their timeouts, for over 60 s in 3 of 9 tries
        (librdkafka 2.16), and the new partition was never read back. A client created now
        learns the cluster, the new broker included, from its own first metadata request.
        """
        # The producer refreshes a topic's metadata only every few minutes on its own: without
        # this request it refuses the new partitions (_UNKNOWN_PARTITION) for that long.
        self._producer.list_topics(self.topic, timeout=5)
        receiver = KafkaReceiver(self._reader(partitions), self.receive_errors)
        self._grown.append(receiver)
        return receiver

    def _reader(self, partitions: list[int], unknown_ok: bool = False) -> Any:
        """A consumer reading ``partitions`` back from their log ends; with ``unknown_ok``, a
        partition whose log end is not known in time starts where the consumer finds it."""
        from confluent_kafka import OFFSET_END, Consumer, TopicPartition

        consumer = Consumer(quiet(self._clients["consumer"]))
        try:
            if unknown_ok:
                ends = log_ends(consumer, self.topic, partitions, self.leaders() or {})
            else:
                ends = list_offsets(consumer, self.topic, partitions, WATERMARK_TIMEOUT_S)
            consumer.assign(
                [TopicPartition(self.topic, p, ends.get(p, OFFSET_END)) for p in partitions]
            )
        except Exception:
            consumer.close()
            raise
        return consumer

    def send(self, partition: int, seq: int, payload: bytes, report: AckReport) -> None:
        """Produce to ``partition``; BufferError when librdkafka's queue is full."""

        def done(err: Any, _msg: Any) -> None:
            report(partition, seq, None if err is None else err.name())

        self._producer.produce(self.topic, value=payload, partition=partition, on_delivery=done)

    def serve_reports(self, timeout_s: float) -> None:
        """Serve delivery reports as soon as librdkafka has them, so an ack is stamped when it
        arrives (give or take a thread wake-up), not when some loop next polled.

        (``Message.latency()`` is no substitute: it is measured when the report is served.)
        """
        self._producer.poll(timeout_s)

    def receive(self, timeout_s: float) -> Iterable[bytes | None] | None:
        """What arrived on the first consumer (see :func:`arrivals`); a fleet's partitions whose
        log end was found are read from there and handed to the fleet first."""
        while not self._ends.empty():
            self._take_ends(*self._ends.get())
        return arrivals(self._consumer, timeout_s, self.receive_errors)

    def _take_ends(self, partitions: list[int], ends: dict[int, int]) -> None:
        """Reading moved to the looked-up ends of those of ``partitions`` still assigned, which
        are then probed; one whose end was not found (its leader slow or down: logged) is read
        from where the consumer finds the end, so its messages sent before then are counted
        lost, never absent."""
        from confluent_kafka import TopicPartition

        ready = [p for p in partitions if p in self._looking]
        self._looking.difference_update(partitions)
        for p in ready:
            if p in ends:
                self._consumer.seek(TopicPartition(self.topic, p, ends[p]))
        if ready and self._assigned is not None:
            self._assigned(ready)

    def close_receiver(self) -> None:
        """Close the consumers."""
        self._closing = True
        self._consumer.close()
        if self._offsets is not None:
            self._offsets.close()
        for receiver in self._grown:
            receiver.close()

    def release(self) -> None:
        """Drop the producer: its threads would otherwise go on reconnecting until a GC pass."""
        self._producer = None


def log_ends(
    consumer: Any, topic: str, partitions: list[int], leaders: dict[int, int]
) -> dict[int, int]:
    """Partition → log end, for the partitions whose leader answers within
    ``WATERMARK_TIMEOUT_S``; the others are left out, and logged.

    One request per leader, all at once: one slow or down leader fails only its own
    partitions, in one timeout (a single request for all would fail them all).
    """
    by_leader: dict[int, list[int]] = {}
    for p in partitions:
        by_leader.setdefault(leaders.get(p, -1), []).append(p)
    ends: dict[int, int] = {}
    errors: dict[int, str] = {}

    def ask(group: list[int]) -> None:
        try:
            ends.update(list_offsets(consumer, topic, group, WATERMARK_TIMEOUT_S))
        except Exception as exc:
            errors.update(dict.fromkeys(group, str(exc)))

    threads = [threading.Thread(target=ask, args=(g,)) for g in by_leader.values()]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    missing = sorted(set(partitions) - set(ends))
    if missing:
        log.warning(
            "%s: log end of partitions %s not known in %g s (%s); probing them anyway: their "
            "messages are read back from where the consumer finds the log end once the leader "
            "answers, and those sent before then are counted lost",
            topic,
            missing,
            WATERMARK_TIMEOUT_S,
            errors.get(missing[0], "no answer"),
        )
    return ends


def arrivals(
    consumer: Any, timeout_s: float, on_error: Callable[[Any], None] | None = None
) -> Iterable[bytes | None] | None:
    """What arrived: ``poll`` returns on the first message, ``consume(timeout=0)`` then drains
    what is already fetched. The consumer's errors go to ``on_error``.

    (``consume()`` with a timeout would hold arrivals until it expires, adding up to that
    timeout to every measured latency.)
    """
    first = consumer.poll(timeout_s)
    if first is None:
        return None
    msgs = [first, *consumer.consume(num_messages=1000, timeout=0)]
    if on_error is not None:
        for m in msgs:
            if m.error():
                on_error(m.error())
    return (m.value() for m in msgs if not m.error())


class KafkaReceiver:
    """One consumer of probe partitions, polled by a receive thread of its own."""

    def __init__(self, consumer: Any, on_error: Callable[[Any], None] | None = None) -> None:
        self._consumer, self._on_error = consumer, on_error

    def receive(self, timeout_s: float) -> Iterable[bytes | None] | None:
        """What arrived (see :func:`arrivals`)."""
        return arrivals(self._consumer, timeout_s, self._on_error)

    def close(self) -> None:
        """Close the consumer."""
        self._consumer.close()


def echo_producer(config: ProbeConfig) -> Any:
    """The echo topic's producer (its buffer bounded by ``echo_buffer``)."""
    from confluent_kafka import Producer

    return Producer(quiet(watched(config.clients())["echo_producer"]))


def topic_admins(config: ProbeConfig) -> tuple[TopicAdmin, TopicAdmin]:
    """Admin clients of the probed cluster and of the echo cluster (the same one when they are)."""
    from kafkautil.admin import TopicAdmin

    user = config.client_settings()
    probed = TopicAdmin(
        quiet({**user, "bootstrap.servers": config.bootstrap}), ADMIN_TIMEOUT_S, SURVEY_TIMEOUT_S
    )
    if (config.echo_bootstrap or config.bootstrap) == config.bootstrap:
        return probed, probed
    echo = TopicAdmin(
        quiet({**user, "bootstrap.servers": config.echo_bootstrap}),
        ADMIN_TIMEOUT_S,
        SURVEY_TIMEOUT_S,
    )
    return probed, echo
