"""``nines probe``: the open-loop probe that measures from the intended send time."""

from __future__ import annotations

import argparse
import logging

EXAMPLES = """examples:
  nines probe --bootstrap kafka:9092 --cluster prod
  nines probe --bootstrap kafka:9092 --echo-bootstrap monitoring:9092 --rate 200 --size 1KiB
  nines probe --bootstrap nats://nats:4222 --nats-jetstream --echo-bootstrap monitoring:9092
  nines probe --bootstrap redis://redis:6379 --redis-streams --echo-bootstrap monitoring:9092
  nines probe --config nines.yaml            # YAML section `probe:`; flags win over the file
"""


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add the ``probe`` subcommand."""
    p = sub.add_parser(
        "probe",
        help="Probe a Kafka cluster at a fixed rate and publish one echo record per message.",
        description="Sends probe messages on an open-loop fixed-rate schedule to every partition "
        "of the probe topic (so every broker that leads one is probed), stamps each with its "
        "INTENDED send time, consumes them back, and publishes one schema-v1 echo record per "
        "message to the echo topic. A broker stall is counted for every message that should "
        "have been sent during it. Limits: size <= 1 MiB, total rate <= 20,000 msgs/s.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--config", help="YAML file; its `probe:` section")
    p.add_argument(
        "--bootstrap",
        help="target: Kafka host:port list, or nats://host:4222, redis://host:6379, "
        "amqp://user:pass@host:5672/vhost (RabbitMQ)",
    )
    p.add_argument(
        "--nats-jetstream",
        action="store_true",
        default=None,
        help="nats:// only: publish through JetStream (its PubAck is the ack)",
    )
    p.add_argument(
        "--redis-streams",
        action="store_true",
        default=None,
        help="redis:// only: a stream (XADD's reply is the ack) instead of pub/sub",
    )
    p.add_argument("--echo-bootstrap", help="cluster for echo records (default: --bootstrap)")
    p.add_argument("--topic", help="probe topic (default nines.probe)")
    p.add_argument("--echo-topic", help="echo topic (default nines.echoes)")
    p.add_argument("--rate", help="messages per second per partition (default 100)")
    p.add_argument("--size", help="payload bytes (default 512; max 1MiB)")
    p.add_argument("--cluster", help="name of the probed cluster (label)")
    p.add_argument("--probe-id", help="probe id (default host-pid)")
    p.add_argument("--loss-timeout", help="declare a message lost after this (default 30s)")
    p.add_argument("--duration", help="stop after this long (default: until SIGTERM)")
    p.add_argument("--echo-format", help="v1: one JSON echo per message (default); v2: batches")
    p.add_argument("--metrics-host", help="metrics address (default 127.0.0.1)")
    p.add_argument(
        "--web-config-file",
        help="TLS and basic auth for /metrics, in Prometheus exporter-toolkit's format",
    )
    p.add_argument("--metrics-port", type=int, help="metrics port (default 9465; 0 disables)")
    p.add_argument(
        "--manage-topic",
        action="store_true",
        default=None,
        help="create the probe and echo topics when missing; add a partition for each broker that "
        "joins (never a reassignment)",
    )
    p.add_argument(
        "--rebalance",
        action="store_true",
        default=None,
        help="with --manage-topic: also elect preferred leaders so every broker leads one",
    )
    p.add_argument("--summary-file", help="write the totals here as JSON at a clean stop")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Validate the configuration and probe."""
    from core.config import ConfigError, build, section
    from core.config_io import check_port_free, load_yaml
    from core.webconfig import load_web_config
    from probes.agent import run_probe
    from probes.config import ProbeConfig

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    values = section(load_yaml(args.config), "probe")
    flags = {
        "bootstrap": args.bootstrap,
        "echo_bootstrap": args.echo_bootstrap,
        "topic": args.topic,
        "echo_topic": args.echo_topic,
        "rate": args.rate,
        "size": args.size,
        "cluster": args.cluster,
        "probe_id": args.probe_id,
        "loss_timeout": args.loss_timeout,
        "duration": args.duration,
        "echo_format": args.echo_format,
        "metrics_host": args.metrics_host,
        "web_config_file": args.web_config_file,
        "metrics_port": args.metrics_port,
        "manage_topic": args.manage_topic,
        "rebalance": args.rebalance,
        "nats_jetstream": args.nats_jetstream,
        "redis_streams": args.redis_streams,
        "summary_file": args.summary_file,
    }
    if not values.get("bootstrap") and not args.bootstrap:
        raise ConfigError("probe.bootstrap: required (--bootstrap or `probe: bootstrap:`)")
    config = build(ProbeConfig, values, flags, prefix="probe")
    config.client_settings()  # an unset env: or unreadable file: secret fails here, exit 2
    check_port_free(config.metrics_host, config.metrics_port)  # before any connection
    load_web_config(config.web_config_file)  # a bad file or certificate: exit 2, now
    return run_probe(config)
