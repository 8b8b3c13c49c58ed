"""``nines stream``'s flags and their config: the Spark job from echo records to histograms.

``monitor.pipeline`` registers the command and runs it with the exporter as the job's sink.
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from core.settings import add_flags, flag_values
from kafkautil.acls import STREAM_GROUP_PREFIX
from streaming.config import StreamConfig

#: The ``stream:`` section's model: StreamConfig, or one composing it with the exporter's.
C = TypeVar("C", bound="StreamConfig")

#: The settings that are flags too, in --help's order (the others are YAML only).
FLAGS = (
    "bootstrap",
    "echo_topic",
    "kafka_login",
    "aws_region",
    "windows",
    "watermark",
    "digits",
    "checkpoint",
    "archive",
    "trigger",
    "starting_offsets",
    "master",
    "spark_log",
)

EXAMPLES = """examples:
  nines stream --bootstrap kafka:9092 --checkpoint /data/ckpt --archive /data/archive
  nines stream --bootstrap localhost:9092 --windows 10s,1m --watermark 5s --trigger 1s
  nines stream --config nines.yaml          # YAML section `stream:`; flags win over the file
"""


def add_parser(
    sub: argparse._SubParsersAction,  # type: ignore[type-arg]
    model: type[StreamConfig] = StreamConfig,
    flags: Sequence[str] = FLAGS,
) -> argparse.ArgumentParser:
    """Add the ``stream`` subcommand's parser (the caller sets what runs it): ``flags`` of
    ``model``, the job's or one composing it."""
    p = sub.add_parser(
        "stream",
        help="Run the Spark job: echoes -> windowed HDR histograms -> Prometheus.",
        description="Reads echo records, keeps one HDR histogram per (window, cluster, topic, "
        "partition, kind) in Spark's stateful aggregation for every resolution, and serves the "
        "latest closed windows' high nines (sample-size gated), exact max and a cumulative "
        "histogram on /metrics. Late, malformed and vanished records are counted, never dropped "
        "silently. With --checkpoint, restarts are exactly once.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--config", help="YAML file; its `stream:` section")
    add_flags(p, model, flags)  # help, default and unit from the model
    return p


#: Seconds the pre-flight check waits for the cluster's metadata (as the probe does).
PREFLIGHT_TIMEOUT_S = 5.0
#: The pre-flight consumer's group (looked up, never joined).
PREFLIGHT_GROUP = f"{STREAM_GROUP_PREFIX}preflight"
#: Seconds the pre-flight check waits for a ``spark://`` master to accept a connection (Spark
#: itself retried for 69 s, then printed 207 lines).
MASTER_CONNECT_TIMEOUT_S = 3.0


def check_master(master: str, timeout_s: float = MASTER_CONNECT_TIMEOUT_S) -> None:
    """Before Spark starts: a ``spark://`` master with nothing listening is one line naming it.

    Each ``HOST:PORT`` of the URL is tried once (several: a ZooKeeper HA list, where one that
    answers is enough); other masters (local, ``k8s://``, yarn) are Spark's to reach.
    """
    import socket

    from core.config import ConfigError

    if not master.startswith("spark://"):
        return
    why = ""
    for address in master.removeprefix("spark://").split(","):
        host, _, port = address.rpartition(":")
        try:
            with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s):
                return
        except OSError as exc:
            why = exc.strerror or str(exc) or type(exc).__name__
    raise ConfigError(
        f"stream.master: nothing answers at {master} ({why}); start the Spark master, or "
        "name one that runs (local[*] runs Spark in this process)"
    )


def check_directories(config: StreamConfig) -> None:
    """Before Spark starts: the checkpoint and archive directories and Spark's log file
    writable, the checkpoint's logs intact and written by this job (its state format,
    windows, layout and echo topic)."""
    from streaming.checkpoint import check_checkpoint, check_log_file, check_writable_dir
    from streaming.state_format import check_state_format, job_settings

    if config.checkpoint:
        check_checkpoint(config.checkpoint)
        check_state_format(config.checkpoint, job_settings(config))
    if config.archive:
        check_writable_dir(config.archive, "stream.archive")
    if config.spark_log:
        check_log_file(config.spark_log, "stream.spark_log")


def preflight(config: StreamConfig, timeout_s: float = PREFLIGHT_TIMEOUT_S) -> None:
    """Check, before Spark starts, that the bootstrap answers and the echo topic exists.

    One metadata request with the job's own consumer settings (``kafka:``); nothing is
    created (a full metadata request never auto-creates topics). Raises ConfigError naming the
    field.
    """
    from confluent_kafka import Consumer, KafkaException

    from core.config import ConfigError
    from kafkautil import ConnectFailures, describe_topic
    from kafkautil.auth import auth_settings, check_auth
    from runtime.config_io import resolve_secrets

    quiet = logging.getLogger("nines.stream.preflight")
    if not quiet.handlers:
        quiet.addHandler(logging.NullHandler())
    quiet.propagate = False  # librdkafka's connect failures would add lines to our one
    failures = ConnectFailures()
    settings = {**resolve_secrets(config.kafka), **auth_settings(config.auth)}
    # no AWS credentials, or the OIDC issuer refuses the client or does not answer: exit 2, now
    check_auth(config.auth, "stream.kafka_login", settings)
    try:
        consumer = Consumer(
            {
                "bootstrap.servers": config.bootstrap,
                "group.id": PREFLIGHT_GROUP,
                "enable.auto.commit": False,
                **settings,
                "logger": quiet,
                "error_cb": failures,
            }
        )
    except KafkaException as exc:
        raise ConfigError(f"kafka: {exc.args[0].str()}") from None
    try:
        describe_topic(
            consumer,
            config.echo_topic,
            bootstrap=config.bootstrap,
            field="echo_topic",
            hint="create it (or run nines probe --manage-topic)",
            timeout_s=timeout_s,
            failures=failures,
            by_name="READ",
        )
        check_group(consumer, config, timeout_s)
    finally:
        consumer.close()


def check_group(consumer: Any, config: StreamConfig, timeout_s: float) -> None:
    """ConfigError when the job's principal may not Describe its consumer groups.

    The job's consumers assign partitions and never commit, but librdkafka looks their group
    up (FindCoordinator), once a second for as long as the broker refuses: the read tasks
    would fail on it. OffsetFetch of the pre-flight's group needs the coordinator: it answers
    at once when the right is there, else times out while the refusal waits in the consumer's
    queue.
    """
    from confluent_kafka import KafkaException, TopicPartition

    from core.config import ConfigError
    from kafkautil.acls import lacks

    try:
        consumer.committed([TopicPartition(config.echo_topic, 0)], timeout=timeout_s)
        return
    except KafkaException:
        pass
    while (event := consumer.poll(0)) is not None:  # anything else is for the job to meet
        error = event.error()
        if error is not None and error.name() == "GROUP_AUTHORIZATION_FAILED":
            why = lacks(error.name(), "DESCRIBE", "GROUP", PREFLIGHT_GROUP)
            raise ConfigError(
                f"kafka: {why} (grant it on the groups prefixed {STREAM_GROUP_PREFIX!r})"
            )


def stream_config(
    args: argparse.Namespace,
    model: type[C],
    flags: Sequence[str] = FLAGS,
    checks: Sequence[Callable[[C], None]] = (),
) -> C:
    """The validated ``model`` from the YAML file and ``flags``, once ``checks`` have passed and
    the cluster has been checked."""
    from core.config import ConfigError, build, section
    from runtime.config_io import load_yaml

    values = section(load_yaml(args.config), "stream")
    given = flag_values(args, flags)
    if not values.get("bootstrap") and not args.bootstrap:
        raise ConfigError("stream.bootstrap: required (--bootstrap or `stream: bootstrap:`)")
    config = build(model, values, given, prefix="stream")
    for check in checks:  # before any connection
        check(config)
    check_directories(config)
    check_master(config.master)
    preflight(config)
    return config
