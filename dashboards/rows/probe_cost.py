"""The probe's own cost beside its send lag: is the probe, or the broker, the bottleneck?"""

from dashboards.common import count_timeseries, latency_timeseries

ROW = "Probe: send lag, CPU, throttling, requests and RTT per broker"

CLUSTER = 'cluster=~"$cluster"'


def panels() -> list[object]:
    """Send lag and pauses; CPU and cgroup throttling; requests and librdkafka RTT per broker."""
    return [
        latency_timeseries(
            "Probe send lag and pauses ($window windows)",
            [
                (
                    f'max by (cluster) (nines_latency_seconds{{{CLUSTER}, partition="all", '
                    f'kind="send_lag", window="$window", q="0.999"}})',
                    "{{cluster}} send lag p99.9",
                ),
                (
                    f'max by (cluster) (nines_latency_max_seconds{{{CLUSTER}, partition="all", '
                    f'kind="send_lag", window="$window"}})',
                    "{{cluster}} send lag max",
                ),
                (
                    f"max by (cluster) (nines_probe_hiccup_max_seconds{{{CLUSTER}}})",
                    "{{cluster}} pause (last interval)",
                ),
            ],
            "How far the probe fell behind its schedule, beside its own longest pause. A send "
            "lag that rises with the pauses or the throttling (next panels) is the probe's; one "
            "that rises alone is a full producer queue (a slow broker). Alert "
            "NinesProbeBottleneck.",
        ),
        count_timeseries(
            "Probe CPU (cores) and cgroup throttling (share of periods)",
            [
                (
                    f"sum by (cluster) (rate(nines_probe_cpu_seconds_total{{{CLUSTER}}}"
                    "[$__rate_interval]))",
                    "{{cluster}} CPU (cores)",
                ),
                (
                    "sum by (cluster) (rate(nines_probe_cgroup_cpu_throttled_periods_total"
                    f"{{{CLUSTER}}}[$__rate_interval])) / sum by (cluster) "
                    f"(rate(nines_probe_cgroup_cpu_periods_total{{{CLUSTER}}}[$__rate_interval]))",
                    "{{cluster}} throttled share",
                ),
            ],
            "The probe process's CPU (all threads, librdkafka's included), and the share of its "
            "cgroup's CFS periods in which its CPU limit throttled it (absent where the host "
            "exports no CFS counters).",
            width=12,
        ),
        count_timeseries(
            "Kafka requests per second by broker",
            [
                (
                    "sum by (cluster, client, broker) "
                    f"(rate(nines_probe_client_requests_total{{{CLUSTER}}}[$__rate_interval]))",
                    "{{cluster}} {{client}} → broker {{broker}}",
                ),
            ],
            "Requests the probe's producer, consumer and echo producer send to each broker "
            "(librdkafka statistics). Requests cost the probe and the broker more than messages "
            "do; a client that spins against a slow broker shows here.",
            unit="reqps",
            width=12,
        ),
        latency_timeseries(
            "librdkafka RTT p99 by broker, beside end-to-end p99 by broker",
            [
                (
                    "max by (cluster, client, broker) "
                    f"(nines_probe_client_rtt_p99_seconds{{{CLUSTER}}})",
                    "{{cluster}} {{client}} broker {{broker}} RTT p99",
                ),
                (
                    f"max by (cluster, broker) (nines_broker_latency_seconds{{{CLUSTER}, "
                    f'kind="e2e", window="$window", q="0.99"}})',
                    "{{cluster}} broker {{broker}} e2e p99",
                ),
            ],
            "Request round trip as the probe's clients see it (librdkafka, over its last "
            "statistics window of 1 s), beside each broker's end-to-end p99: a broker slow to "
            "answer shows in both; an end-to-end tail with a short RTT lies elsewhere (the "
            "probe, replication, the consumer).",
        ),
        count_timeseries(
            "Fleet: seconds since a partition was last probed, and handoff losses",
            [
                (
                    "time() - max by (cluster, topic, partition) "
                    "(nines_probe_partition_last_sent_timestamp_seconds"
                    f"{{{CLUSTER}}})",
                    "{{cluster}} partition {{partition}} unprobed for (s)",
                ),
                (
                    "sum by (cluster, topic, partition) "
                    f"(increase(nines_probe_handoff_lost_total{{{CLUSTER}}}[$__rate_interval]))",
                    "{{cluster}} partition {{partition}} handoff lost",
                ),
            ],
            "A probe fleet (docs/deploy.md, A probe fleet): per partition, the seconds since "
            "any replica last sent to it (about 1 / rate while one probes it; it grows through a "
            "handoff, while a dead replica's partitions wait for the group to move them), and "
            "the messages in flight at a handoff that were not back before it completed. Empty "
            "for a single probe.",
            unit="s",
            width=24,
        ),
    ]
