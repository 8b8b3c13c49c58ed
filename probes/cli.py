"""``nines probe``: the open-loop probe that measures from the intended send time."""

from __future__ import annotations

import argparse
import logging

from core.settings import add_flags, flag_values
from probes.config import ProbeConfig

#: The settings that are flags too, in --help's order (the others are YAML only).
FLAGS = (
    "bootstrap",
    "nats_jetstream",
    "redis_streams",
    "echo_bootstrap",
    "kafka_login",
    "aws_region",
    "topic",
    "echo_topic",
    "rate",
    "schedule",
    "size",
    "cluster",
    "probe_id",
    "loss_timeout",
    "duration",
    "echo_format",
    "metrics_host",
    "web_config_file",
    "metrics_port",
    "manage_topic",
    "rebalance",
    "summary_file",
    "fleet_group",
)

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
        "INTENDED send time, consumes them back, and publishes one echo record per message to "
        "the echo topic, in v2 batches (one Kafka message per 1,000 records or 100 ms; "
        "--echo-format v1: one JSON message per record). A broker stall is counted for every "
        "message that should have been sent during it. Limits: size <= 1 MiB, total rate <= "
        "20,000 msgs/s.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--config", help="YAML file; its `probe:` section")
    add_flags(p, ProbeConfig, FLAGS)  # help, default and unit from the model
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Validate the configuration and probe."""
    from core.config import ConfigError, build, section
    from kafkautil.auth import check_auth
    from probes.agent import run_probe
    from runtime.config_io import check_port_free, load_yaml
    from runtime.fdlimit import raise_open_files_limit
    from runtime.webconfig import load_web_config

    raise_open_files_limit()  # /metrics connections and Kafka sockets: as Go programs do

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    values = section(load_yaml(args.config), "probe")
    flags = flag_values(args, FLAGS)
    if not values.get("bootstrap") and not args.bootstrap:
        raise ConfigError("probe.bootstrap: required (--bootstrap or `probe: bootstrap:`)")
    config = build(ProbeConfig, values, flags, prefix="probe")
    settings = config.client_settings()  # an unset env:/unreadable file: secret: exit 2, here
    # no AWS credentials, or the OIDC issuer refuses the client or does not answer: exit 2, now
    check_auth(config.auth, "probe.kafka_login", settings)
    if config.metrics_port:  # 0: no /metrics, so no address to check
        check_port_free(config.metrics_host, config.metrics_port)  # before any connection
    load_web_config(config.web_config_file)  # a bad file or certificate: exit 2, now
    return run_probe(config)
