"""The probe's own /metrics: counters per partition, echo buffer health, pauses, and the probe's
own cost (CPU, its cgroup's throttling, its Kafka clients' requests and round trips)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from core import promproto
from kafkautil.auth import token_failures
from probes.cgroup import Throttling, read_throttling
from probes.client_stats import CLIENT_STATS, ClientStats
from runtime.webconfig import WebConfig
from runtime.webserver import MetricsServer

_COUNTERS = (
    ("sent", "Messages handed to the producer."),
    ("acked", "Messages acknowledged by the broker."),
    ("received", "Messages consumed back (first arrival)."),
    ("lost", "Messages declared lost after the loss timeout."),
    ("late_after_loss", "Arrivals after being declared lost (not double counted)."),
    ("duplicates", "Repeated arrivals of a sequence number."),
    ("out_of_order", "Arrivals with a lower sequence number than one already seen."),
)


class ProbeCollector(Collector):
    """Builds fresh families from the agent's ``stats()`` snapshot on every scrape."""

    def __init__(self, snapshot: Callable[[], dict[str, Any]]) -> None:
        self.snapshot = snapshot

    def collect(self) -> Iterator[Any]:
        """Metric families of the current snapshot."""
        s = self.snapshot()
        labels = ["cluster", "topic", "partition"]
        base = [s["cluster"], s["topic"]]
        for name, doc in _COUNTERS:
            fam = CounterMetricFamily(f"nines_probe_{name}", doc, labels=labels)
            for p, stats in sorted(s["partitions"].items()):
                fam.add_metric([*base, str(p)], stats[name])
            yield fam
        errors = CounterMetricFamily(
            "nines_probe_send_errors", "Produce failures.", labels=[*labels, "error"]
        )
        leader = GaugeMetricFamily(
            "nines_probe_partition_leader", "Broker id leading the partition.", labels=labels
        )
        for p, stats in sorted(s["partitions"].items()):
            for error, n in sorted(stats["send_errors"].items()):
                errors.add_metric([*base, str(p), error], n)
            leader.add_metric([*base, str(p)], s["leaders"].get(p, -1))
        yield errors
        yield leader
        if "fleet" in s:
            yield from _fleet(s, labels, base)
        yield _gauge(
            "nines_probe_in_flight", "Messages sent, not yet received or lost.", s["in_flight"]
        )
        yield CounterMetricFamily(
            "nines_probe_echo_dropped",
            "Echo records dropped: the bounded echo buffer was full.",
            value=s["echo_dropped"],
        )
        yield CounterMetricFamily(
            "nines_probe_arrivals_dropped",
            "Probe messages that came back but were dropped before the tracker saw them (the "
            "transport's bounded arrival queue was full); they are counted lost at their timeout.",
            value=s["arrivals_dropped"],
        )
        yield _gauge(
            "nines_probe_echo_buffered",
            "Echo records waiting for the echo cluster.",
            s["echo_buffered"],
        )
        hic = GaugeMetricFamily(
            "nines_probe_hiccup_max_seconds",
            "Longest probe pause in the last hiccup interval.",
            labels=["cluster"],
        )
        hic.add_metric([s["cluster"]], s["hiccup_max_us"] / 1e6)
        yield hic
        for name, doc in (
            ("brokers", "Brokers of the probed cluster, as last seen."),
            ("brokers_unprobed", "Brokers that lead no probed partition, so nothing probes them."),
        ):
            gauge = GaugeMetricFamily(f"nines_probe_{name}", doc, labels=["cluster"])
            gauge.add_metric([s["cluster"]], s[name])
            yield gauge
        admin = CounterMetricFamily(
            "nines_probe_admin_errors",
            "Topic-management admin calls the cluster refused (the probe goes on).",
            labels=["cluster", "op", "error"],
        )
        for (op, error), n in sorted(s["admin_errors"].items()):
            admin.add_metric([s["cluster"], op, error], n)
        yield admin
        receive = CounterMetricFamily(
            "nines_probe_receive_errors",
            "Authorization failures reading probe messages back (the probe goes on; what is not "
            "read back is counted lost).",
            labels=["cluster", "topic", "error"],
        )
        for error, n in sorted(s.get("receive_errors", {}).items()):
            receive.add_metric([s["cluster"], s["topic"], error], n)
        if receive.samples:  # a family without samples is absent to every query anyway
            yield receive


class TopicCollector(Collector):
    """The probe topic as the probed cluster last described it: does it exist, which of its
    partitions go unprobed, and how long ago the cluster answered at all."""

    def __init__(self, snapshot: Callable[[], dict[str, Any]]) -> None:
        self.snapshot = snapshot

    def collect(self) -> Iterator[Any]:
        """Metric families of the current snapshot."""
        s = self.snapshot()
        for name, doc in (
            (
                "topic_exists",
                "1 while the cluster's last metadata answer had the probe topic, 0 once it says "
                "the topic is gone (deleted) or before it answered at all.",
            ),
            (
                "partitions_unprobed",
                "Partitions of the probe topic, as last seen, that the probe does not probe (yet: "
                "new ones are taken in within seconds, unless the rate limit refuses them).",
            ),
        ):
            gauge = GaugeMetricFamily(f"nines_probe_{name}", doc, labels=["cluster", "topic"])
            gauge.add_metric([s["cluster"], s["topic"]], s[name])
            yield gauge
        age = GaugeMetricFamily(
            "nines_probe_metadata_age_seconds",
            "Seconds since the probed cluster last answered a metadata request (since the probe "
            "started if it never did): it grows while the cluster accepts and does not answer.",
            labels=["cluster"],
        )
        age.add_metric([s["cluster"]], s["metadata_age_s"])
        yield age


class SelfCollector(Collector):
    """The probe's own cost per scrape: process CPU, its cgroup's throttling, and its Kafka
    clients' requests and round trips per broker (librdkafka's statistics)."""

    def __init__(
        self,
        snapshot: Callable[[], dict[str, Any]],
        clients: ClientStats,
        throttling: Callable[[], Throttling | None] = read_throttling,
    ) -> None:
        self.snapshot, self.clients, self.throttling = snapshot, clients, throttling

    def collect(self) -> Iterator[Any]:
        """Metric families read now (absent where the host or the transport has none)."""
        cluster = str(self.snapshot()["cluster"])
        cpu = CounterMetricFamily(
            "nines_probe_cpu_seconds",
            "CPU time of the probe process (user + system, all threads, librdkafka's included).",
            labels=["cluster"],
        )
        cpu.add_metric([cluster], time.process_time())
        yield cpu
        found = self.throttling()
        if found is not None:
            for name, doc, value in (
                ("cgroup_cpu_periods", "CFS periods of the probe's cgroup.", found.periods),
                (
                    "cgroup_cpu_throttled_periods",
                    "CFS periods in which the probe's cgroup was throttled (its CPU limit).",
                    found.throttled_periods,
                ),
                (
                    "cgroup_cpu_throttled_seconds",
                    "Time the probe's cgroup spent throttled (its CPU limit).",
                    found.throttled_s,
                ),
            ):
                fam = CounterMetricFamily(f"nines_probe_{name}", doc, labels=["cluster"])
                fam.add_metric([cluster], value)
                yield fam
        yield from self._clients(cluster)
        tokens = CounterMetricFamily(
            "nines_probe_token_failures",
            "Token requests of the probe's Kafka clients that failed (the OAUTHBEARER issuer "
            "refused or did not answer), by login.",
            labels=["cluster", "login"],
        )
        for login, n in sorted(token_failures().items()):
            tokens.add_metric([cluster, login], n)
        if tokens.samples:  # only where a token login is in use
            yield tokens

    def _clients(self, cluster: str) -> Iterator[Any]:
        totals = self.clients.totals()
        if not totals:
            return
        labels = ["cluster", "client", "broker"]
        counters = {
            name: CounterMetricFamily(f"nines_probe_client_{name}", doc, labels=labels)
            for name, doc in (
                ("requests", "Requests the probe's Kafka client sent to the broker."),
                ("request_bytes", "Bytes of those requests."),
                ("responses", "Responses the probe's Kafka client received from the broker."),
                ("response_bytes", "Bytes of those responses."),
                ("wakeups", "Wake-ups of the client's thread for that broker (librdkafka)."),
            )
        }
        rtt = {
            stat: GaugeMetricFamily(
                f"nines_probe_client_rtt_{stat}_seconds",
                f"librdkafka's request round-trip time to the broker, {stat} over its last "
                "statistics window (absent when no response came in it).",
                labels=labels,
            )
            for stat in ("avg", "p99")
        }
        for (client, broker), b in sorted(totals.items()):
            where = [cluster, client, broker]
            counters["requests"].add_metric(where, b.requests)
            counters["request_bytes"].add_metric(where, b.request_bytes)
            counters["responses"].add_metric(where, b.responses)
            counters["response_bytes"].add_metric(where, b.response_bytes)
            counters["wakeups"].add_metric(where, b.wakeups)
            if b.rtt_avg_us is not None and b.rtt_p99_us is not None:
                rtt["avg"].add_metric(where, b.rtt_avg_us / 1e6)
                rtt["p99"].add_metric(where, b.rtt_p99_us / 1e6)
        yield from counters.values()
        yield from rtt.values()


def _fleet(s: dict[str, Any], labels: list[str], base: list[str]) -> Iterator[Any]:
    """A fleet replica's share (``probes.fleet``): which partitions it probes, when it last sent
    to each, and what its handoffs ended (docs/deploy.md, "A probe fleet")."""
    probed = GaugeMetricFamily(
        "nines_probe_partition_probed",
        "1 while this fleet replica probes the partition, 0 while another does (or none).",
        labels=labels,
    )
    for p, mine in sorted(s["fleet"].items()):
        probed.add_metric([*base, str(p)], mine)
    yield probed
    last = GaugeMetricFamily(
        "nines_probe_partition_last_sent_timestamp_seconds",
        "When this replica last sent to the partition (Unix time); the fleet's unprobed time of "
        "a partition is time() minus the max over replicas.",
        labels=labels,
    )
    handoff = CounterMetricFamily(
        "nines_probe_handoff_lost",
        "Messages in flight to a partition when the fleet moved it to another replica, not back "
        "before the move completed (no echo: the broker did not lose them).",
        labels=labels,
    )
    for p, stats in sorted(s["partitions"].items()):
        if stats["last_sent_us"]:
            last.add_metric([*base, str(p)], stats["last_sent_us"] / 1e6)
        handoff.add_metric([*base, str(p)], stats["handoff_lost"])
    yield last
    yield handoff


def _gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, value=value)


def serve(
    snapshot: Callable[[], dict[str, Any]],
    host: str,
    port: int,
    web: WebConfig | None = None,
    clients: ClientStats = CLIENT_STATS,
) -> MetricsServer:
    """Serve /metrics from a registry of its own; the server (``close()`` stops it).

    The exporter's server (``runtime.webserver``: timeouts, bounded renderers, TLS off the accept
    thread), with the web config's TLS and basic auth, rendering the registry per scrape, in the
    protobuf format for a scraper that asks for it (a Prometheus with native histograms on asks
    every target for it). ``clients``: where the Kafka clients' statistics arrive (the
    process's, unless a test brings its own).
    """
    from prometheus_client import CollectorRegistry, generate_latest

    registry = CollectorRegistry(auto_describe=False)
    registry.register(ProbeCollector(snapshot))
    registry.register(TopicCollector(snapshot))
    registry.register(SelfCollector(snapshot, clients))
    return MetricsServer(
        lambda: generate_latest(registry),
        host,
        port,
        web,
        protobuf=lambda: promproto.encode_families(registry.collect()),
    )
