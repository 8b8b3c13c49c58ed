"""Bad input, table-driven across the commands: one line naming the field, exit 2, no connection.

Every row runs the real CLI entry point with a listening socket as the bootstrap server: a row
passes only if the command said one line on stderr (file-descriptor level, so librdkafka's own
output counts), exited 2, and never connected. The same table is published in
docs/configuration.md (``test_the_table_is_published`` keeps the two equal).
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from monitor.cli import main

ROOT = Path(__file__).resolve().parents[2]
NON_UTF8 = b"probe:\n  rate: \xff\xfe\n"

#: (command, flags, config file text or None, the error after ``nines CMD: error: ``).
#: ``BUSY`` in a flag is a port already in use; ``{port}``/``{config}`` in a message are filled in.
# fmt: off
CASES: list[tuple[str, list[str], str | bytes | None, str]] = [
    (
        "probe",
        ["--rate", "0"],
        None,
        "probe.rate: must be > 0 messages per second per partition (got '0')",
    ),
    (
        "probe",
        ["--rate", "-5"],
        None,
        "probe.rate: must be > 0 messages per second per partition (got '-5')",
    ),
    ("probe", ["--rate", "abc"], None, "probe.rate: not a rate: 'abc' (use e.g. 100 or 100/s)"),
    (
        "probe",
        ["--rate", "1e9"],
        None,
        "probe.rate: must be at most the probe's total limit of 20000/s (got '1e9')",
    ),
    (
        "probe",
        ["--size", "2MiB"],
        None,
        "probe.size: must be between 64 and 1048576 bytes (got '2MiB')",
    ),
    ("probe", ["--size", "-1"], None, "probe.size: not a size: '-1' (use e.g. 512, 1KiB, 1MiB)"),
    ("probe", ["--loss-timeout", "0s"], None, "probe.loss_timeout: must be > 0 (got '0s')"),
    (
        "probe",
        ["--duration", "soon"],
        None,
        "probe.duration: not a duration: 'soon' (use e.g. 500ms, 10s, 1m, 2h)",
    ),
    (
        "probe",
        ["--metrics-port", "70000"],
        None,
        "probe.metrics_port: must be a TCP port (0 disables) (got 70000)",
    ),
    (
        "probe",
        ["--metrics-port", "BUSY"],
        None,
        "metrics-port: cannot listen on 127.0.0.1:{port} (Address already in use); pick another port, or 0 for any free port",
    ),
    (
        "probe",
        ["--bootstrap", ""],
        None,
        "probe.bootstrap: required (--bootstrap or `probe: bootstrap:`)",
    ),
    (
        "probe",
        ["--topic", "bad topic"],
        None,
        "probe.topic: must be a Kafka topic name: 1-249 of A-Z a-z 0-9 . _ - (got 'bad topic')",
    ),
    (
        "probe",
        ["--rebalance"],
        None,
        "probe.rebalance: needs manage_topic (--manage-topic): it only rebalances what it manages "
        "(got True)",
    ),
    (
        "probe",
        ["--bootstrap", "nats://127.0.0.1:4222", "--echo-bootstrap", "127.0.0.1:9", "--manage-topic"],
        None,
        "probe.manage_topic: Kafka only: other systems' subjects, channels and queues are not "
        "managed (got True)",
    ),
    (
        "probe",
        [],
        "probe:\n  kafka:\n    sasl.password: 918273645\n",
        "probe.kafka.sasl.password: Input should be a valid string",
    ),
    (
        "probe",
        [],
        'probe:\n  kafka: "sasl.password=hunter2"\n',
        "probe.kafka: Input should be a valid dictionary",
    ),
    (
        "probe",
        [],
        "probe:\n  kafka:\n    security.protocol: hunter2\n",
        'kafka: Invalid value "<redacted>" for configuration property "security.protocol"',
    ),
    (
        "probe",
        [],
        "probe:\n  kafka:\n    no.such.key: 1\n",
        "probe.kafka.no.such.key: Input should be a valid string",
    ),
    ("probe", [], "probe:\n  rat: 5\n", "probe.rat: unknown key"),
    ("probe", [], NON_UTF8, "config: {config} is not UTF-8 text (byte 15)"),
    (
        "probe",
        [],
        "probe: [unclosed\n",
        "config: {config} is not valid YAML: while parsing a flow sequence",
    ),
    ("probe", [], "- a\n- b\n", "config: {config} must hold a mapping at the top level"),
    ("probe", [], "probe: 5\n", "probe: must be a mapping"),
    (
        "probe",
        ["--config", "/no/such.yaml"],
        None,
        "config: cannot read /no/such.yaml: No such file or directory",
    ),
    (
        "stream",
        ["--windows", "10s,15s"],
        None,
        "stream.windows: every window must be a multiple of the finest (10s) (got '10s,15s')",
    ),
    (
        "stream",
        ["--windows", "500ms"],
        None,
        "stream.windows: windows must be whole seconds, at least 1s (got '500ms')",
    ),
    (
        "stream",
        ["--windows", "abc"],
        None,
        "stream.windows: not a duration: 'abc' (use e.g. 500ms, 10s, 1m, 2h)",
    ),
    ("stream", ["--digits", "7"], None, "stream.digits: must be 1..4 significant digits (got 7)"),
    (
        "stream",
        ["--watermark=-1s"],
        None,
        "stream.watermark: not a duration: '-1s' (use e.g. 500ms, 10s, 1m, 2h)",
    ),
    ("stream", ["--trigger", "0s"], None, "stream.trigger: must be > 0 (got '0s')"),
    (
        "stream",
        ["--metrics-port", "99999"],
        None,
        "stream.metrics_port: must be a TCP port (0 = any free port) (got 99999)",
    ),
    (
        "stream",
        ["--starting-offsets", "middle"],
        None,
        "argument --starting-offsets: invalid choice: 'middle' (choose from 'latest', 'earliest') (see nines stream --help)",
    ),
    (
        "stream",
        [],
        "stream:\n  lowest_us: 0\n",
        "stream.lowest_us: Input should be greater than or equal to 1 (got 0)",
    ),
    (
        "stream",
        [],
        "stream:\n  shuffle_partitions: -3\n",
        "stream.shuffle_partitions: Input should be greater than or equal to 1 (got -3)",
    ),
    (
        "stream",
        [],
        "stream:\n  master: bogus\n",
        "stream.master: must be local, local[N], local[*], local[N,F], spark://…, k8s://…, yarn, or empty (spark-submit chooses) (got 'bogus')",
    ),
    (
        "stream",
        [],
        "stream:\n  kafka:\n    sasl.password: 918273645\n",
        "stream.kafka.sasl.password: Input should be a valid string",
    ),
    ("stream", [], "stream:\n  highest: 0\n", "stream.highest: must be > 0"),
    (
        "broker",
        ["--brokers", "0"],
        None,
        "broker.brokers: Input should be greater than or equal to 1 (got 0)",
    ),
    (
        "broker",
        ["--topic", "noparts"],
        None,
        "broker.topics.0: must be NAME:PARTITIONS (got 'noparts')",
    ),
    (
        "broker",
        ["--port", "70000"],
        None,
        "broker.port: Input should be less than or equal to 65535 (got 70000)",
    ),
    ("demo", ["--hiccup", "5s"], None, "hiccup: expected DURATION@OFFSET like 5s@30s (got '5s')"),
    (
        "demo",
        ["--window", "7s"],
        None,
        "window: 7s and the 1m windows the demo also shows must divide one another; use e.g. 5s, 10s, 30s or 5m (got '7s')",
    ),
    (
        "demo",
        ["--rate", "0"],
        None,
        "rate: must be > 0 messages per second per partition (got '0')",
    ),
    (
        "demo",
        ["--duration", "abc"],
        None,
        "duration: not a duration: 'abc' (use e.g. 500ms, 10s, 1m, 2h)",
    ),
    ("demo", ["--sla", "/no/such.yaml"], None, "sla: no such file '/no/such.yaml'"),
    (
        "report",
        ["--archive", "/no/such", "--out", "x.png"],
        None,
        "archive: no windows under /no/such",
    ),
    (
        "report",
        ["--archive", "/tmp", "--kind", "bogus", "--out", "x.png"],
        None,
        "archive: no windows under /tmp",
    ),
    (
        "slo",
        ["--archive", "/tmp", "--sla", "examples/sla.yaml", "--since", "abc"],
        None,
        "since: not a duration: 'abc' (use e.g. 500ms, 10s, 1m, 2h)",
    ),
    (
        "alerts",
        ["render", "--sla", "/no/such.yaml"],
        None,
        "config: cannot read /no/such.yaml: No such file or directory",
    ),
    (
        "dashboards",
        ["push", "--url", "grafana:3000", "--token", "t"],
        None,
        "url: expected http(s)://HOST[:PORT][/PATH] (got 'grafana:3000')",
    ),
    (
        "stream",
        ["--metrics-port", "BUSY"],
        None,
        "metrics-port: cannot listen on 127.0.0.1:{port} (Address already in use); pick another port, or 0 for any free port",
    ),
    (
        "stream",
        ["--echo-topic", "a/b"],
        None,
        "stream.echo_topic: must be a Kafka topic name: 1-249 of A-Z a-z 0-9 . _ - (got 'a/b')",
    ),
    (
        "stream",
        ["--master", "local[0]"],
        None,
        "stream.master: must be local, local[N], local[*], local[N,F], spark://…, k8s://…, yarn, or empty (spark-submit chooses) (got 'local[0]')",
    ),
]
# fmt: on


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    """A bootstrap address that counts connections instead of speaking Kafka."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    sock.setblocking(False)
    yield sock
    sock.close()


def connections(sock: socket.socket) -> int:
    n = 0
    try:
        while True:
            sock.accept()[0].close()
            n += 1
    except BlockingIOError:
        return n


@pytest.mark.parametrize(
    ("command", "flags", "config", "message"),
    CASES,
    ids=[f"{i}-{c[0]}" for i, c in enumerate(CASES)],
)
def test_bad_input_is_one_line_exit_2_and_no_connection(
    command: str,
    flags: list[str],
    config: str | bytes | None,
    message: str,
    listener: socket.socket,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
) -> None:
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    busy_port = busy.getsockname()[1]
    argv = [command, *(f.replace("BUSY", str(busy_port)) for f in flags)]
    if command in ("probe", "stream") and "--bootstrap" not in flags:
        argv += ["--bootstrap", f"127.0.0.1:{listener.getsockname()[1]}"]
    path = tmp_path / "nines.yaml"
    if config is not None:
        path.write_bytes(config if isinstance(config, bytes) else config.encode())
        argv += ["--config", str(path)]
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's own errors
        code = exc.code
    finally:
        busy.close()
    out = capfd.readouterr()
    expected = message.format(port=busy_port, config=path)
    assert (code, out.err) == (2, f"nines {command}: error: {expected}\n")
    assert out.out == ""
    assert connections(listener) == 0


def published_table() -> str:
    lines = ["| command | input | error (after `nines COMMAND: error:`) |", "|---|---|---|"]
    for command, flags, config, message in CASES:
        shown = " ".join(flags)
        if config is not None:
            text = config.decode("latin-1") if isinstance(config, bytes) else config
            shown = (shown + " " if shown else "") + "config: " + text.strip().replace("\n", " ⏎ ")
        cell = message.replace("|", "\\|")
        lines.append(f"| {command} | `{shown or '(none)'}` | {cell} |")
    return "\n".join(lines)


def test_there_are_at_least_40_cases() -> None:
    assert len(CASES) >= 40


def test_the_table_is_published() -> None:
    docs = (ROOT / "docs" / "configuration.md").read_text()
    assert published_table() in docs, "regenerate: print(published_table())"
