"""The probe agent: schedule → producer → consumer → tracker → echo publisher, plus hiccups.

A composition: each part does one job (``schedule``, ``producer``, ``consumer``, ``tracker``,
``planner``, ``publisher``, ``hiccup``) and only the transport knows the broker (``transport``,
Kafka's in ``kafka``). The agent wires them, owns their threads and stops them in order.

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

from probes import summary
from probes.clock import ProbeClock
from probes.config import ProbeConfig
from probes.consumer import ProbeConsumer
from probes.fleet import FleetShare
from probes.hiccup import HiccupMeter
from probes.manager import NO_ANSWER, Admin, AdminErrors, Growable, TopicManager, ensure_topic
from probes.payload import probe_hash
from probes.planner import PartitionPlanner
from probes.producer import ProbeProducer
from probes.publisher import EchoSink, publisher_for
from probes.schedule import Schedule
from probes.threads import Deaths, named
from probes.tracker import Tracker
from probes.transport import Receiver, Transport

log = logging.getLogger("nines.probe")

HOUSEKEEPING_S = 0.1
METADATA_REFRESH_S = 2.0
#: The schedule starts this long after ``start()`` (µs), once every thread is running.
START_DELAY_US = 50_000


class ProbeAgent:
    """One probe process's worth of probing; ``start()`` then ``stop()``.

    ``transport``, ``echo_sink`` and the ``admin`` clients (probed cluster, echo cluster) of
    topic management default to Kafka clients built from ``config`` in ``start()`` (tests pass
    their own). With another transport and no admin, nothing surveys the topic.
    """

    def __init__(
        self,
        config: ProbeConfig,
        *,
        transport: Transport | None = None,
        echo_sink: EchoSink | None = None,
        admin: tuple[Admin, Admin] | None = None,
    ) -> None:
        self.config = config
        self.clock = ProbeClock()
        self.tracker = Tracker(
            config.probe_id,
            config.cluster,
            config.topic,
            config.size,
            int(config.loss_timeout * 1e6),
            config.system,
        )
        #: Guards the tracker and the planner's leaders, shared by all the probe's threads.
        self._lock = threading.Lock()
        self.planner = PartitionPlanner(
            config.topic, config.rate, self._lock, fleet=config.fleet_group is not None
        )
        #: A fleet replica's share of the topic (``fleet_group``); None: every partition.
        self.fleet: FleetShare | None = None
        self.publisher = publisher_for(config)
        self._transport = transport
        self._echo_sink = echo_sink
        self._admin = admin
        self.admin_errors = AdminErrors()
        self.manager: TopicManager | None = None
        self._stopping = threading.Event()
        #: Set when the schedule ends (``duration``) or a thread dies (``failure``).
        self._ended = threading.Event()
        self.deaths = Deaths(self._ended)
        self._drained = threading.Event()
        self._threads: list[threading.Thread] = []
        self._sender: threading.Thread | None = None
        #: Messages still unresolved when ``stop()`` gave up waiting (they have no echo).
        self.unresolved_at_stop = 0
        self._server: Any = None
        self._hiccups: HiccupMeter | None = None
        self._created_s = time.monotonic()

    @property
    def partitions(self) -> list[int]:
        """The probe topic's partitions (all of them are probed)."""
        return self.planner.partitions

    @property
    def leaders(self) -> dict[int, int]:
        """Partition → the broker leading it, as last seen."""
        return self.planner.leaders

    @property
    def echo_dropped(self) -> int:
        """Echo records dropped (buffer full or delivery failed)."""
        return self.publisher.dropped

    @property
    def echoes_published(self) -> int:
        """Echo (and hiccup) records the echo cluster acknowledged."""
        return self.publisher.published

    # -- set-up -------------------------------------------------------------------------------

    def start(self) -> ProbeAgent:
        """Connect, check the topic, and start probing."""
        cfg = self.config
        if self._transport is None:
            from probes.kafka import topic_admins
            from probes.systems import open_transport

            self._transport = open_transport(cfg)
            if self._admin is None and cfg.system == "kafka":
                self._admin = topic_admins(cfg)
        transport = self._transport
        later = self._ensure_topics() if cfg.manage_topic else []
        self.planner.discover(transport)
        if self._echo_sink is None:
            from probes.kafka import echo_producer

            self._echo_sink = echo_producer(cfg)
        self.publisher.open(self._echo_sink)
        if cfg.fleet_group is not None:
            self._join_fleet()
        else:
            transport.open_receiver(self.partitions)
        self.schedule = Schedule(
            self.partitions,
            cfg.rate,
            self.clock.now_us() + START_DELAY_US,
            aligned=cfg.schedule == "aligned",
        )
        probe = probe_hash(cfg.probe_id)
        publish = self.publisher.publish
        self.producer = ProbeProducer(
            transport,
            self.schedule,
            self.tracker,
            self._lock,
            self.clock,
            self.leaders,
            probe,
            cfg.size,
            publish,
            cfg.duration,
            owned=None if self.fleet is None else self.fleet.owned,
        )
        if self.fleet is not None:
            self.fleet.join = self.producer.join
        self.consumer = ProbeConsumer(
            transport, self.tracker, self._lock, self.clock, probe, publish
        )
        self._hiccups = HiccupMeter(
            self.clock, cfg.probe_id, cfg.cluster, cfg.hiccup_interval, publish, self.deaths
        )
        if self._admin is not None:
            self.manager = TopicManager(
                self._admin[0],
                self.planner,
                self._probe_new,
                manage=cfg.manage_topic,
                rebalance=cfg.rebalance,
                replication_factor=cfg.replication_factor,
                interval_s=cfg.manage_interval,
                errors=self.admin_errors,
            )
            for admin, topic in later:
                self.manager.create_when_answered(admin, topic, cfg.partitions_per_broker)
        loops = {
            "nines-send": self._send_loop,
            "nines-receive": lambda: self.consumer.receive_until(self._drained),
            "nines-acks": lambda: self.producer.serve_acks(self._drained),
            "nines-house": self._housekeeping_loop,
        }
        if self.manager is not None:
            loops["nines-admin"] = self._admin_loop
        self._threads = [
            threading.Thread(target=named(name, loop, self.deaths), name=name, daemon=True)
            for name, loop in loops.items()
        ]
        self._sender = self._threads[0]
        self._threads.append(self._hiccups)
        for t in self._threads:
            t.start()
        if cfg.metrics_port:
            from probes.metrics import serve
            from runtime.webconfig import load_web_config

            web = load_web_config(cfg.web_config_file)
            self._server = serve(self.stats, cfg.metrics_host, cfg.metrics_port, web)
        return self

    def _join_fleet(self) -> None:
        """``fleet_group``: join the group; it assigns the partitions to probe from then on."""
        from core.config import ConfigError
        from probes.kafka import KafkaTransport

        if not isinstance(self._transport, KafkaTransport):
            raise ConfigError("fleet_group: needs a Kafka transport (a Kafka consumer group)")
        self.fleet = FleetShare(
            self._lock,
            self.tracker,
            self.planner,
            self.clock,
            self.publisher.publish,
            START_DELAY_US,
        )
        planner = self.planner

        def leaders() -> dict[int, int]:
            with self._lock:
                return dict(planner.leaders)

        self._transport.open_group(self.fleet.assigned, self.fleet.revoked, leaders)

    def _ensure_topics(self) -> list[tuple[Admin, str]]:
        """``--manage-topic``: create the probe and echo topics when the clusters have none.

        A cluster that accepts connections and says nothing does not stop the start (the
        planner says it in one line and probes from when it answers): the topics it kept from
        being created are returned, for the topic manager to create once it answers.
        """
        from core.config import ConfigError

        cfg = self.config
        if self._admin is None or not isinstance(self._transport, Growable):
            raise ConfigError("manage_topic: needs a Kafka transport (the probe's topic admin)")
        probed, echo = self._admin
        per_broker, rf = cfg.partitions_per_broker, cfg.replication_factor
        later: list[tuple[Admin, str]] = []
        why = ensure_topic(probed, cfg.topic, per_broker, rf, self.admin_errors)
        if why == NO_ANSWER:
            later.append((probed, cfg.topic))
        elif why is not None:
            raise ConfigError(f"topic: {cfg.topic!r} is missing on {cfg.bootstrap}: {why}")
        silent = why == NO_ANSWER and echo is probed
        errors = self.admin_errors
        why = None if silent else ensure_topic(echo, cfg.echo_topic, per_broker, rf, errors)
        if silent or why == NO_ANSWER:
            later.append((echo, cfg.echo_topic))
        if why is not None:  # probing goes on; the echo records it cannot deliver are counted
            log.warning(
                "echo topic %s is missing on %s: %s (the probe goes on; its echo records wait in "
                "the echo buffer, then are dropped and counted%s)",
                cfg.echo_topic,
                cfg.echo_bootstrap or cfg.bootstrap,
                why,
                "; it is created once the cluster answers" if why == NO_ANSWER else "",
            )
        return later

    def _probe_new(self, partitions: list[int]) -> None:
        """Probe partitions that appeared while probing: read them back first, then send."""
        assert isinstance(self._transport, Growable)
        try:
            receiver = self._transport.add_receiver(partitions)
        except Exception as exc:  # e.g. no watermarks in time: the next survey tries again
            log.warning("cannot read back new partitions %s yet: %s", partitions, exc)
            self.planner.forget(partitions)
            return
        if receiver is not None:
            self._receive_on_own_thread(receiver, partitions)
        self.producer.join(partitions, self.clock.now_us() + START_DELAY_US)

    def _receive_on_own_thread(self, receiver: Receiver, partitions: list[int]) -> None:
        """Poll ``receiver`` on a thread of its own, so its arrivals are stamped as promptly as
        the first consumer's (one thread polling two clients would hold one's arrivals while
        it waits on the other)."""
        c = self.consumer
        consumer = ProbeConsumer(receiver, self.tracker, self._lock, self.clock, c.probe, c.publish)
        name = "nines-receive-" + "-".join(map(str, partitions))
        thread = threading.Thread(
            target=named(name, lambda: consumer.receive_until(self._drained), self.deaths),
            name=name,
            daemon=True,
        )
        thread.start()
        self._threads.append(thread)

    # -- the loops ----------------------------------------------------------------------------

    def _send_loop(self) -> None:
        self.producer.send_until(self._stopping)
        self._ended.set()  # the schedule's end (a death sets it through ``deaths``)

    def _housekeeping_loop(self) -> None:
        """Declare losses, serve the echo sink's reports, follow leader moves."""
        assert self._transport is not None
        last_md = time.monotonic()
        while not self._drained.is_set():
            with self._lock:
                lost = self.tracker.expire(self.clock.now_us())
            for echo in lost:
                self.publisher.publish(echo)
            self.publisher.poll()
            if time.monotonic() - last_md > METADATA_REFRESH_S:
                last_md = time.monotonic()
                self.planner.refresh(self._transport)
            time.sleep(HOUSEKEEPING_S)

    def _admin_loop(self) -> None:
        """Survey the topic and act on it (``--manage-topic``, ``--rebalance``) on a thread of
        its own: an admin call, or reading a new partition's log end, that waits on a joining or
        moving leader must not hold back loss expiry and the echoes' publishing."""
        assert self.manager is not None
        while not self._drained.is_set():
            self.manager.tick(time.monotonic())
            time.sleep(HOUSEKEEPING_S)

    # -- shutdown and state -------------------------------------------------------------------

    @property
    def failure(self) -> str | None:
        """How the first of the probe's threads that died died (one line), else None."""
        return self.deaths.first

    def wait(self, timeout_s: float | None = None) -> bool:
        """Wait until the schedule ends (``duration``) or a thread dies (``failure``); True if
        either did."""
        return self._ended.wait(timeout_s)

    def stop(self, timeout_s: float | None = None) -> None:
        """Stop scheduling, wait (bounded) for outstanding echoes, flush, close.

        Every message sent gets its echo unless it is still unresolved when ``timeout_s`` runs
        out (counted in ``unresolved_at_stop``). Returns within about ``timeout_s`` + 1 s.
        """
        assert self._transport is not None, "stop() before start()"
        timeout_s = self.config.shutdown_timeout if timeout_s is None else timeout_s
        deadline = time.monotonic() + timeout_s
        self._stopping.set()
        # The sender may be between send() and tracker.sent(): wait for it to leave its loop
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
            self.publisher.publish(echo)
        if self.unresolved_at_stop:
            log.warning(
                "stopping with %d messages still in flight after %g s: they have no echo",
                self.unresolved_at_stop,
                timeout_s,
            )
        self.publisher.flush(max(0.5, deadline - time.monotonic()))
        dropped = self.publisher.dropped
        in_flight = self.publisher.give_up()
        if self.publisher.dropped > dropped or in_flight:
            log.warning(
                "stopping with %d echo records the echo cluster did not take within %g s: "
                "dropped and counted (echo_dropped)%s",
                self.publisher.dropped - dropped,
                timeout_s,
                f"; {in_flight} more were in flight to it and may yet be written"
                if in_flight
                else "",
            )
        if self.fleet is not None:
            with self._lock:
                self.fleet.closing = True
        self._transport.close_receiver()
        if self._server is not None:
            self._server.shutdown()
        # Release the clients now: this agent sits in reference cycles (its threads and the
        # hiccup meter point back at it), so it is only freed by a garbage-collection pass,
        # and until then their threads would go on reconnecting to the cluster. (Not while a
        # thread of ours that uses them is still running: it would fail on None.)
        if not any(t.is_alive() for t in self._threads):
            self.publisher.release()
            self._transport.release()
            self._echo_sink = None
            self._admin = self.manager = None

    def totals(self) -> dict[str, int]:
        """The totals of the summary file (``probes.summary.FIELDS``), over all partitions."""
        s = self.stats()
        parts = s["partitions"].values()
        return {
            **{k: sum(p[k] for p in parts) for k in ("sent", "received", "lost", "handoff_lost")},
            "unresolved": self.unresolved_at_stop,
            "echo_records_published": s["echoes_published"],
            "echo_dropped": s["echo_dropped"],
        }

    def summary(self) -> str:
        """One line of totals for humans, logged when the probe stops (programs read the
        summary file, ``probes.summary``)."""
        totals = self.totals()
        return "stopped: " + " ".join(f"{k}={totals[k]}" for k in summary.FIELDS)

    def stats(self) -> dict[str, Any]:
        """A snapshot of counters (what /metrics shows)."""
        with self._lock:
            parts = {
                p: {**vars(s), "send_errors": dict(s.send_errors)}
                for p, s in self.tracker.stats.items()
            }
            in_flight = self.tracker.unreceived
            leaders = dict(self.leaders)
            brokers = len(self.planner.brokers)
            unprobed = len(self.planner.unprobed())
            unprobed_partitions = len(self.planner.unprobed_partitions())
            exists = bool(self.planner.exists)
            answered_s = self.planner.answered_s
            fleet = None
            if self.fleet is not None:
                fleet = {p: int(p in self.fleet.owned) for p in {*self.planner.seen, *parts}}
        # since the cluster's last metadata answer; since the probe started if it never answered
        metadata_age_s = time.monotonic() - (self._created_s if answered_s is None else answered_s)
        # only Kafka's transport counts its consumers' authorization failures
        receive_errors = getattr(self._transport, "receive_errors", None)
        return {
            "cluster": self.config.cluster,
            "topic": self.config.topic,
            "partitions": parts,
            "leaders": leaders,
            "in_flight": in_flight,
            "echo_dropped": self.publisher.dropped,
            # only a transport with a bounded arrival queue of its own (NATS) drops arrivals
            "arrivals_dropped": getattr(self._transport, "arrivals_dropped", 0),
            "echo_buffered": self.publisher.buffered,
            "echoes_published": self.publisher.published,
            "hiccup_max_us": self._hiccups.last_max_us if self._hiccups else 0,
            "brokers": brokers,
            "brokers_unprobed": unprobed,
            "partitions_unprobed": unprobed_partitions,
            "topic_exists": int(exists),
            "metadata_age_s": metadata_age_s,
            "admin_errors": dict(self.admin_errors.counts),
            "receive_errors": dict(receive_errors.counts) if receive_errors is not None else {},
            # a fleet replica's: partition → 1 while it probes it, 0 otherwise
            **({"fleet": fleet} if fleet is not None else {}),
        }


#: The interpreter's GIL switch interval in a probe process (CPython's default is 5 ms).
GIL_SWITCH_INTERVAL_S = 0.0005


def quiet_process_for_probing() -> None:
    """Process-wide settings that keep the sender punctual.

    A sender that wakes while another thread holds the GIL waits up to the switch interval
    before it may send: at CPython's 5 ms that was most of the send lag's p99.9; a tenth of it
    halves that (docs/benchmarks.md, figures the code cites). The threads of a probe mostly
    sleep, so switching more often costs no measurable CPU.
    """
    sys.setswitchinterval(GIL_SWITCH_INTERVAL_S)


def run_probe(config: ProbeConfig) -> int:
    """Probe until SIGTERM/SIGINT or the configured duration; exit status 0 on a clean stop,
    1 when a thread of the probe died (one line, the last, names it and its error)."""
    import signal

    summary.check_writable(config.summary_file)
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
    try:
        agent.stop()
    except Exception:
        if agent.failure is None:
            raise
        # what killed a thread may fail the stop too (the bounded stop is best effort then)
        log.debug("stopping after a thread died failed", exc_info=True)
    else:
        log.info("%s", agent.summary())
        if config.summary_file:
            summary.write_summary(config.summary_file, agent.totals())
    if agent.failure is not None:
        log.error("the probe stops: %s", agent.failure)
        return 1
    return 0
