"""The probe agent: schedule → producer → consumer → tracker → echo publisher, plus hiccups.

Threads: a sender that follows the open-loop schedule (never waiting for acks or echoes), a
receiver that consumes the probe topic back, a delivery-report thread that timestamps acks as
they arrive, a housekeeper that declares losses and refreshes leaders, and the hiccup meter. All
timestamps come from one ``ProbeClock``.
"""

from __future__ import annotations

import gc
import logging
import sys
import threading
import time
from typing import Any

from core.config import ConfigError
from core.echo import Echo, Hiccup, encode_record
from probes.clock import ProbeClock
from probes.config import MAX_TOTAL_RATE, ProbeConfig
from probes.hiccup import HiccupMeter
from probes.payload import decode, encode, probe_hash
from probes.schedule import Schedule
from probes.threads import named
from probes.tracker import Tracker

log = logging.getLogger("nines.probe")

HOUSEKEEPING_S = 0.1
METADATA_REFRESH_S = 2.0


class ProbeAgent:
    """One probe process's worth of probing; ``start()`` then ``stop()``."""

    def __init__(self, config: ProbeConfig) -> None:
        self.config = config
        self.clock = ProbeClock()
        self.tracker = Tracker(
            config.probe_id,
            config.cluster,
            config.topic,
            config.size,
            int(config.loss_timeout * 1e6),
        )
        self._hash = probe_hash(config.probe_id)
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._sender_done = threading.Event()
        self._drained = threading.Event()
        self._threads: list[threading.Thread] = []
        self._sender: threading.Thread | None = None
        self.leaders: dict[int, int] = {}
        self.partitions: list[int] = []
        self.echo_dropped = 0
        self.echoes_published = 0
        #: Messages still unresolved when ``stop()`` gave up waiting (they have no echo).
        self.unresolved_at_stop = 0
        self._warned_at = 0.0
        self._server: Any = None
        self._hiccups: HiccupMeter | None = None
        self._producer: Any = None
        self._echo_producer: Any = None
        self._echo_buffered_at_stop = 0

    # -- set-up -------------------------------------------------------------------------------

    def _discover(self) -> None:
        """Partitions and leaders of the probe topic; refuse what cannot work."""
        from confluent_kafka import KafkaException

        try:
            md = self._producer.list_topics(timeout=5)
        except KafkaException as exc:
            raise ConfigError(
                f"bootstrap: cannot reach {self.config.bootstrap} ({exc.args[0].str()})"
            ) from None
        topic = md.topics.get(self.config.topic)
        if topic is None or topic.error is not None or not topic.partitions:
            raise ConfigError(
                f"topic: unknown topic {self.config.topic!r} on "
                f"{self.config.bootstrap}; create it with one partition per broker"
            )
        self.partitions = sorted(topic.partitions)
        total = self.config.rate * len(self.partitions)
        if total > MAX_TOTAL_RATE:
            raise ConfigError(
                f"rate: {self.config.rate:g}/s × {len(self.partitions)} partitions "
                f"= {total:g}/s exceeds the limit of {MAX_TOTAL_RATE:g}/s"
            )
        self.leaders = {p: topic.partitions[p].leader for p in self.partitions}
        idle = sorted(set(md.brokers) - set(self.leaders.values()))
        if idle:
            log.warning(
                "brokers %s lead no partition of %s, so they are not probed; add partitions "
                "(or reassign leaders) so that every broker leads at least one",
                idle,
                self.config.topic,
            )

    def start(self) -> ProbeAgent:
        """Connect, check the topic, and start probing."""
        from confluent_kafka import Consumer, Producer, TopicPartition

        cfg = self.config
        clients = cfg.clients()
        self._producer = Producer(clients["producer"])
        self._discover()
        self._echo_producer = Producer(clients["echo_producer"])
        self._consumer = Consumer(clients["consumer"])
        starts = []
        for p in self.partitions:
            _, high = self._consumer.get_watermark_offsets(TopicPartition(cfg.topic, p), timeout=5)
            starts.append(TopicPartition(cfg.topic, p, high))
        self._consumer.assign(starts)
        self.schedule = Schedule(self.partitions, cfg.rate, self.clock.now_us() + 50_000)
        self._hiccups = HiccupMeter(
            self.clock, cfg.probe_id, cfg.cluster, cfg.hiccup_interval, self._publish
        )
        loops = {
            "nines-send": self._send_loop,
            "nines-receive": self._receive_loop,
            "nines-acks": self._report_loop,
            "nines-house": self._housekeeping_loop,
        }
        self._threads = [
            threading.Thread(target=named(name, loop), name=name, daemon=True)
            for name, loop in loops.items()
        ]
        self._sender = self._threads[0]
        self._threads.append(self._hiccups)
        for t in self._threads:
            t.start()
        if cfg.metrics_port:
            self._serve_metrics()
        return self

    def _serve_metrics(self) -> None:
        from prometheus_client import CollectorRegistry, start_http_server

        from probes.metrics import ProbeCollector

        registry = CollectorRegistry(auto_describe=False)
        registry.register(ProbeCollector(self.stats))
        self._server, _ = start_http_server(
            self.config.metrics_port, addr=self.config.metrics_host, registry=registry
        )

    # -- the loops ----------------------------------------------------------------------------

    def _send_loop(self) -> None:
        try:
            self._send_until_stopped()
        finally:
            self._sender_done.set()

    def _send_until_stopped(self) -> None:
        cfg = self.config
        end_us = None if cfg.duration is None else self.schedule.t0_us + int(cfg.duration * 1e6)
        produce = self._producer.produce
        while not self._stopping.is_set():
            intended, partition, seq = self.schedule.next_due()
            if end_us is not None and intended >= end_us:
                return
            now = self.clock.now_us()
            if intended > now:
                time.sleep(min(intended - now, 5_000) / 1e6)
                continue
            payload = encode(self._hash, partition, seq, intended, cfg.size)
            callback = self._delivery(partition, seq)
            leader = self.leaders.get(partition, -1)
            while True:
                try:
                    # Under the lock: the delivery report (another thread) and the message
                    # itself (the receiver) must not reach the tracker before the send does.
                    with self._lock:
                        produce(cfg.topic, value=payload, partition=partition, on_delivery=callback)
                        self.tracker.sent(partition, seq, intended, self.clock.now_us(), leader)
                    break
                except BufferError:  # the queue is full: wait, keep the intended time
                    time.sleep(0.005)  # the delivery-report thread frees the queue
                    if self._stopping.is_set():
                        return
            self.schedule.advance(partition)

    def _report_loop(self) -> None:
        """Serve delivery reports as soon as librdkafka has them, so ``acked_us`` is the time
        the ack arrived (give or take a thread wake-up), not when some loop next polled.

        (``Message.latency()`` is no substitute: it is measured when the report is served.)
        """
        while not self._drained.is_set():
            self._producer.poll(0.05)

    def _delivery(self, partition: int, seq: int):  # type: ignore[no-untyped-def]
        def done(err: Any, _msg: Any) -> None:
            now = self.clock.now_us()
            with self._lock:
                if err is None:
                    echo = self.tracker.acked(partition, seq, now)
                else:
                    echo = self.tracker.send_failed(partition, seq, err.name())
            if echo is not None:
                self._publish(echo)

        return done

    def _receive_loop(self) -> None:
        while not self._drained.is_set():
            # poll() returns as soon as one message arrives; consume(timeout=0) then drains what
            # is already fetched. (consume() with a timeout would hold arrivals until it expires,
            # adding up to that timeout to every measured latency.)
            first = self._consumer.poll(0.05)
            if first is None:
                continue
            msgs = [first, *self._consumer.consume(num_messages=1000, timeout=0)]
            # Stamp after the drain: the drain can return messages sent after poll() returned
            # (this thread may wait for the GIL in between), and a stamp taken before it gave
            # them received_us < intended_us. Now it is late by at most the drain's duration.
            now = self.clock.now_us()
            for m in msgs:
                if m.error():
                    continue
                head = decode(m.value())
                if head is None or head.probe != self._hash:
                    continue
                with self._lock:
                    echo = self.tracker.received(head.partition, head.seq, now)
                if echo is not None:
                    self._publish(echo)

    def _housekeeping_loop(self) -> None:
        last_md = time.monotonic()
        while not self._drained.is_set():
            with self._lock:
                lost = self.tracker.expire(self.clock.now_us())
            for echo in lost:
                self._publish(echo)
            self._echo_producer.poll(0)
            if time.monotonic() - last_md > METADATA_REFRESH_S:
                last_md = time.monotonic()
                self._refresh_leaders()
            time.sleep(HOUSEKEEPING_S)

    def _refresh_leaders(self) -> None:
        try:
            md = self._producer.list_topics(self.config.topic, timeout=1)
        except Exception:
            return
        topic = md.topics.get(self.config.topic)
        if topic is not None and topic.error is None:
            with self._lock:
                for p, pm in topic.partitions.items():
                    if pm.leader >= 0:
                        self.leaders[p] = pm.leader

    def _publish(self, record: Echo | Hiccup) -> None:
        """Hand an echo to the echo producer; when its bounded buffer is full, count the drop."""
        try:
            self._echo_producer.produce(
                self.config.echo_topic,
                key=self.config.probe_id,
                value=encode_record(record),
                on_delivery=self._echo_done,
            )
        except BufferError:
            self._dropped("echo buffer full")

    def _echo_done(self, err: Any, _msg: Any) -> None:
        if err is None:
            self.echoes_published += 1
        else:
            self._dropped(err.str())

    def _dropped(self, why: str) -> None:
        self.echo_dropped += 1
        now = time.monotonic()
        if now - self._warned_at > 10:
            self._warned_at = now
            log.warning(
                "dropping echo records (%s): %d dropped so far; probing continues",
                why,
                self.echo_dropped,
            )

    # -- shutdown and state -------------------------------------------------------------------

    def wait(self, timeout_s: float | None = None) -> bool:
        """Wait until the schedule ends (``duration``); True if it did."""
        return self._sender_done.wait(timeout_s)

    def stop(self, timeout_s: float | None = None) -> None:
        """Stop scheduling, wait (bounded) for outstanding echoes, flush, close.

        Every message sent gets its echo unless it is still unresolved when ``timeout_s`` runs
        out (counted in ``unresolved_at_stop``). Returns within about ``timeout_s`` + 1 s.
        """
        timeout_s = self.config.shutdown_timeout if timeout_s is None else timeout_s
        deadline = time.monotonic() + timeout_s
        self._stopping.set()
        # The sender may be between produce() and tracker.sent(): wait for it to leave its loop
        # before judging what is in flight, or its last message could lose its echo.
        if self._sender is not None:
            self._sender.join(max(0.0, deadline - time.monotonic()))
        while self.tracker.in_flight and time.monotonic() < deadline:
            time.sleep(0.01)
        self._drained.set()
        if self._hiccups:
            self._hiccups.stop()
        for t in self._threads:
            t.join(max(0.1, deadline - time.monotonic()))
        with self._lock:
            held = self.tracker.release_held()
            self.unresolved_at_stop = len(self.tracker.in_flight)
        for echo in held:
            self._publish(echo)
        if self.unresolved_at_stop:
            log.warning(
                "stopping with %d messages still in flight after %g s: they have no echo",
                self.unresolved_at_stop,
                timeout_s,
            )
        self._echo_producer.flush(max(0.5, deadline - time.monotonic()))
        self._consumer.close()
        if self._server is not None:
            self._server.shutdown()
        # Release the producers now: this agent sits in reference cycles (its threads and the
        # hiccup meter point back at it), so it is only freed by a garbage-collection pass,
        # and until then their threads would go on reconnecting to the cluster. (Not while a
        # thread of ours that uses them is still running: it would fail on None.)
        if not any(t.is_alive() for t in self._threads):
            self._echo_buffered_at_stop = len(self._echo_producer)
            self._producer = self._echo_producer = None

    def summary(self) -> str:
        """One line of totals, logged when the probe stops."""
        s = self.stats()
        parts = s["partitions"].values()
        total = {k: sum(p[k] for p in parts) for k in ("sent", "received", "lost")}
        return (
            f"stopped: sent={total['sent']} received={total['received']} lost={total['lost']} "
            f"unresolved={self.unresolved_at_stop} echo_records_published="
            f"{s['echoes_published']} echo_dropped={s['echo_dropped']}"
        )

    def stats(self) -> dict[str, Any]:
        """A snapshot of counters (what /metrics shows)."""
        with self._lock:
            parts = {
                p: {**vars(s), "send_errors": dict(s.send_errors)}
                for p, s in self.tracker.stats.items()
            }
            in_flight = self.tracker.unreceived
            leaders = dict(self.leaders)
        return {
            "cluster": self.config.cluster,
            "topic": self.config.topic,
            "partitions": parts,
            "leaders": leaders,
            "in_flight": in_flight,
            "echo_dropped": self.echo_dropped,
            "echo_buffered": (
                self._echo_buffered_at_stop
                if self._echo_producer is None
                else len(self._echo_producer)
            ),
            "echoes_published": self.echoes_published,
            "hiccup_max_us": self._hiccups.last_max_us if self._hiccups else 0,
        }


#: The interpreter's GIL switch interval in a probe process (CPython's default is 5 ms).
GIL_SWITCH_INTERVAL_S = 0.0005


def quiet_process_for_probing() -> None:
    """Process-wide settings that keep the sender punctual.

    A sender that wakes while another thread holds the GIL waits up to the switch interval
    before it may send: at CPython's 5 ms that was most of the send lag's p99.9 (1.7 ms at
    1,000 msgs/s); at 0.5 ms it is about 0.75 ms. The threads of a probe mostly sleep, so
    switching more often costs no measurable CPU.
    """
    sys.setswitchinterval(GIL_SWITCH_INTERVAL_S)


def run_probe(config: ProbeConfig) -> int:
    """Probe until SIGTERM/SIGINT or the configured duration; exit status 0 on a clean stop."""
    import signal

    quiet_process_for_probing()
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    agent = ProbeAgent(config).start()
    # Everything allocated so far (modules, clients) lives as long as the process: keep it out
    # of the collector's full passes, which otherwise paused the sender for up to 7 ms.
    gc.freeze()
    log.info(
        "probing %s (%d partitions, %g msgs/s each) as %s",
        config.topic,
        len(agent.partitions),
        config.rate,
        config.probe_id,
    )
    while not stop.is_set() and not agent.wait(0.2):
        pass
    agent.stop()
    log.info("%s", agent.summary())
    return 0
