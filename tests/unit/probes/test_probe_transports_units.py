"""The transport boundary without a server: the system from the --bootstrap scheme, config
errors that name the field and hide passwords, the bounded outbox, and a publish without ack."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pytest

from core.config import ConfigError, build
from core.echo import BadEcho, Echo, decode_record, encode_record
from probes.config import ProbeConfig
from probes.producer import ProbeProducer
from probes.schedule import Schedule
from probes.systems import open_transport
from probes.tracker import Tracker
from probes.transport import NO_ACK, Outbox

ROOT = Path(__file__).resolve().parents[3]
T0 = 1_795_000_000_000_000
ECHO = "monitoring:9092"


def probe_config(**values: object) -> ProbeConfig:
    return build(ProbeConfig, values, prefix="probe")


@pytest.mark.parametrize(
    ("bootstrap", "system", "transport"),
    [
        ("k1:9092,k2:9092", "kafka", "KafkaTransport"),
        ("nats://n:4222", "nats", "NatsTransport"),
        ("NATS://n", "nats", "NatsTransport"),
        ("redis://:pw@r:6379/0", "redis", "RedisTransport"),
        ("amqp://u:p@rabbit:5672/%2F", "rabbitmq", "RabbitTransport"),
    ],
)
def test_the_bootstrap_scheme_chooses_the_system_and_its_transport(
    bootstrap: str, system: str, transport: str
) -> None:
    cfg = probe_config(bootstrap=bootstrap, echo_bootstrap=ECHO)
    assert cfg.system == system
    t = open_transport(cfg)
    try:
        assert type(t).__name__ == transport
    finally:
        t.release()


@pytest.mark.parametrize(
    ("values", "error"),
    [
        ({"bootstrap": "nats://n:4222"}, "probe.echo_bootstrap: required when probing nats"),
        (
            {"bootstrap": "redis://r", "echo_bootstrap": "redis://e"},
            "probe.echo_bootstrap: must be a Kafka host:port list",
        ),
        ({"bootstrap": "k:9092", "nats_jetstream": True}, "probe.nats_jetstream: needs a nats://"),
        (
            {"bootstrap": "nats://n", "echo_bootstrap": ECHO, "redis_streams": True},
            "probe.redis_streams: needs a redis://",
        ),
        ({"bootstrap": "kafka://k:9092"}, "probe.bootstrap: unknown scheme in kafka://k:9092"),
        (
            {"bootstrap": "amqp://u:hunter2@h:99999/v"},
            "probe.bootstrap: bad URL amqp://u:<redacted>@",
        ),
        (
            {"bootstrap": "amqp://u:hunter2@/v"},
            "probe.bootstrap: bad URL amqp://u:<redacted>@/v: no host",
        ),
    ],
)
def test_bad_targets_are_one_line_naming_the_field(values: dict[str, object], error: str) -> None:
    with pytest.raises(ConfigError) as exc:
        probe_config(**values)
    assert str(exc.value).startswith(error), exc.value
    assert "hunter2" not in str(exc.value) and "\n" not in str(exc.value)


def test_cli_exits_2_on_a_bad_url_without_printing_its_password() -> None:
    argv = [sys.executable, "-m", "monitor", "probe", "--bootstrap", "amqp://probe:hunter2@h:0x/"]
    run = subprocess.run(
        [*argv, "--echo-bootstrap", ECHO], capture_output=True, text=True, cwd=ROOT, timeout=60
    )
    assert run.returncode == 2, run.stderr
    assert "probe.bootstrap: bad URL amqp://probe:<redacted>@h:0x/" in run.stderr
    assert "hunter2" not in run.stderr + run.stdout


def test_a_url_with_a_password_can_come_from_the_environment_or_a_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = "amqp://probe:hunter2@rabbit:5672/%2F"
    monkeypatch.setenv("NINES_TARGET_URL", url)
    cfg = probe_config(bootstrap="env:NINES_TARGET_URL", echo_bootstrap=ECHO)
    # the scheme decides after resolving; the field shows the address without the password
    assert (cfg.bootstrap_url(), cfg.system) == (url, "rabbitmq")
    assert cfg.bootstrap == "amqp://probe:<redacted>@rabbit:5672/%2F"
    secret = tmp_path / "url"
    secret.write_text("redis://:hunter2@r:6379/0\n")
    cfg = probe_config(bootstrap=f"file:{secret}", echo_bootstrap=ECHO)
    assert (cfg.bootstrap_url(), cfg.system) == ("redis://:hunter2@r:6379/0", "redis")
    monkeypatch.setenv("NINES_TARGET_URL", "amqp://probe:hunter2@rabbit:0x/")
    with pytest.raises(ConfigError) as exc:  # a bad resolved URL is judged, its password hidden
        probe_config(bootstrap="env:NINES_TARGET_URL", echo_bootstrap=ECHO)
    assert "probe:<redacted>@rabbit" in str(exc.value) and "hunter2" not in str(exc.value)
    monkeypatch.delenv("NINES_TARGET_URL")
    with pytest.raises(ConfigError) as exc:
        probe_config(bootstrap="env:NINES_TARGET_URL", echo_bootstrap=ECHO)
    assert str(exc.value).startswith(
        "probe.bootstrap: environment variable NINES_TARGET_URL is not set"
    )


def test_outbox_is_bounded_and_runs_each_report_on_the_serving_thread() -> None:
    box = Outbox(2)
    served: list[tuple[int, int, str | None, str]] = []

    def report(p: int, s: int, err: str | None) -> None:
        served.append((p, s, err, threading.current_thread().name))

    box.put((0, 0, b"a", report))
    box.put((0, 1, b"b", report))
    with pytest.raises(BufferError):
        box.put((0, 2, b"c", report))
    taken = box.take(0.01)
    assert [i[1] for i in taken] == [0, 1] and box.take(0.01) == []
    box.report(taken[0], None)
    box.report(taken[1], NO_ACK)
    assert served == []  # nothing runs until the report thread serves
    box.serve(0.01)
    me = threading.current_thread().name
    assert served == [(0, 0, None, me), (0, 1, NO_ACK, me)]
    box.put((0, 2, b"c", report))  # room again


def test_a_broker_without_publish_ack_leaves_publish_latency_absent() -> None:
    tracker = Tracker("p", "c", "nines.probe", 100, 30_000_000, system="nats")
    echoes: list[Echo] = []
    producer = ProbeProducer(
        None,  # type: ignore[arg-type]  (reports need no transport)
        Schedule([0], 100, T0),
        tracker,
        threading.Lock(),
        FixedClock(T0 + 500),  # type: ignore[arg-type]
        {0: 0},
        b"probe-id",
        100,
        echoes.append,
    )
    tracker.sent(0, 0, T0, T0 + 10, 0)
    tracker.received(0, 0, T0 + 900)
    producer.reported(0, 0, NO_ACK)
    (echo,) = echoes
    assert echo.acked_us is None and echo.publish_us is None  # never the hand-over time
    assert echo.end_to_end_us == 900 and echo.system == "nats"
    stats = tracker.stats[0]
    assert stats.acked == 0 and stats.send_errors == {}  # neither an ack nor an error


class FixedClock:
    def __init__(self, now_us: int) -> None:
        self._now_us = now_us

    def now_us(self) -> int:
        return self._now_us


# -- the echo's system field ---------------------------------------------------------------------


def echo(system: str = "kafka") -> Echo:
    return Echo("p", "c", "t", 0, 0, 1, 100, T0, T0 + 1, None, T0 + 9, system=system)


def test_system_round_trips_and_a_kafka_echo_is_written_as_before() -> None:
    assert b"system" not in encode_record(echo())  # absent means kafka: v1 bytes unchanged
    assert decode_record(encode_record(echo())).system == "kafka"
    for system in ("nats", "redis", "rabbitmq"):
        raw = encode_record(echo(system))
        assert f'"system":"{system}"'.encode() in raw
        assert decode_record(raw) == echo(system)


@pytest.mark.parametrize(
    ("value", "reason"),
    [(b'"kafkaa"', "system"), (b'""', "system"), (b"1", "bad_type"), (b"null", "bad_type")],
)
def test_an_unknown_or_mistyped_system_is_a_bad_echo(value: bytes, reason: str) -> None:
    raw = encode_record(echo())[:-1] + b',"system":' + value + b"}"
    with pytest.raises(BadEcho) as exc:
        decode_record(raw)
    assert exc.value.reason == reason


@pytest.mark.parametrize("scheme", ["nats://", "redis://", "amqp://probe:hunter2@"])
def test_an_unreachable_server_is_a_config_error_at_once(scheme: str) -> None:
    import socket
    import time

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    t = open_transport(probe_config(bootstrap=f"{scheme}127.0.0.1:{port}", echo_bootstrap=ECHO))
    started = time.monotonic()
    try:
        with pytest.raises(ConfigError) as exc:
            t.discover()
    finally:
        t.release()
    assert str(exc.value).startswith("probe.bootstrap: cannot "), exc.value
    assert "hunter2" not in str(exc.value)
    assert time.monotonic() - started < 5  # not after retrying for ever


def test_nats_arrivals_beyond_its_queue_are_counted_and_exported(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import asyncio
    import types

    from test_probe_loopback import Loopback, Sink

    from probes import ProbeAgent
    from probes import nats as nats_transport
    from probes.metrics import ProbeCollector
    from probes.transport import Layout

    monkeypatch.setattr(nats_transport, "MAX_ARRIVALS", 2)
    transport = nats_transport.NatsTransport(
        probe_config(bootstrap="nats://n:4222", echo_bootstrap=ECHO)
    )
    try:
        for i in range(5):  # the client's callback, as nats-py calls it on the loop
            asyncio.run(transport._arrived(types.SimpleNamespace(data=b"%d" % i)))
        assert transport.arrivals_dropped == 3
        assert transport.receive(0.1) == [b"0", b"1"]  # what fitted is delivered, in order
    finally:
        transport.release()
    # the agent exports its transport's count (a transport without the queue exports 0)
    loop = Loopback(Layout({0: 1}, frozenset({1})), lose=set())
    cfg = probe_config(bootstrap="loopback:0", rate=100, duration=0.2, metrics_port=0)
    agent = ProbeAgent(cfg, transport=loop, echo_sink=Sink()).start()
    try:
        loop.arrivals_dropped = 3  # type: ignore[attr-defined]
        families = {f.name: f for f in ProbeCollector(agent.stats).collect()}
        del loop.arrivals_dropped  # type: ignore[attr-defined]
        none = {f.name: f for f in ProbeCollector(agent.stats).collect()}
    finally:
        agent.stop()
    assert families["nines_probe_arrivals_dropped"].samples[0].value == 3
    assert none["nines_probe_arrivals_dropped"].samples[0].value == 0
