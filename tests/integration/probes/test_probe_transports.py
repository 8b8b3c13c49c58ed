"""The probe against real nats-server, redis-server and rabbitmq-server: the CTRL+Z calibration,
a server restart, and ``nines probe``'s clean SIGTERM. Echoes go to the session's Kafka."""

from __future__ import annotations

import signal
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from probe_runs import (
    RATE,
    ClosedLoop,
    ProbeProcess,
    assert_one_echo_per_message,
    check_ctrl_z,
    ctrl_z,
    records_of,
)
from real_servers import NatsServer, RabbitServer, RedisServer, Server, require

from probes import ProbeAgent, ProbeConfig
from probes.systems import open_transport
from testbroker import EmbeddedBroker

#: variant → (server, the probe's settings, whether the system acknowledges a publish)
VARIANTS: dict[str, tuple[type[Server], dict[str, object], bool]] = {
    "nats": (NatsServer, {}, False),
    "nats-jetstream": (NatsServer, {"nats_jetstream": True}, True),
    "redis": (RedisServer, {}, False),
    "redis-streams": (RedisServer, {"redis_streams": True}, True),
    "rabbitmq": (RabbitServer, {}, True),
}
TOPICS = ("nines.probe", "nines.naive")


@pytest.fixture(scope="module")
def rabbit_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RabbitServer]:
    """One RabbitMQ node for the module: its start takes seconds."""
    server = require(RabbitServer(tmp_path_factory.mktemp("rabbitmq")))
    try:
        server.start()
        yield server
    finally:
        server.close()


@pytest.fixture
def server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Server]:
    """The variant's server, ready for probing (stream or queues in place)."""
    cls, settings, _ = VARIANTS[request.param]
    if cls is RabbitServer:
        rabbit: RabbitServer = request.getfixturevalue("rabbit_server")
        rabbit.start() if rabbit.proc is None or rabbit.proc.poll() is not None else None
        for topic in TOPICS:
            rabbit.declare_queue(topic)
        yield rabbit
        return
    srv = require(cls(tmp_path))
    srv.start()
    try:
        if isinstance(srv, NatsServer) and settings.get("nats_jetstream"):
            for topic in TOPICS:
                srv.add_stream(topic)
        yield srv
    finally:
        srv.stop()


def config(server: Server, variant: str, echo: EmbeddedBroker, probe_id: str, **kw: object):  # type: ignore[no-untyped-def]
    values: dict[str, object] = dict(
        bootstrap=server.url,
        echo_bootstrap=echo.bootstrap,
        rate=RATE,
        metrics_port=0,
        probe_id=probe_id,
        cluster="t",
        **VARIANTS[variant][1],
    )
    values.update(kw)
    return ProbeConfig(**values)  # type: ignore[arg-type]


ALL = pytest.mark.parametrize(
    ("server", "variant"), [(v, v) for v in VARIANTS], indirect=["server"]
)


@ALL
def test_ctrl_z_calibration(server: Server, variant: str, broker: EmbeddedBroker) -> None:
    probe_id = f"ctrlz-{variant}-{uuid.uuid4().hex[:6]}"
    agent = ProbeAgent(config(server, variant, broker, probe_id)).start()
    naive_cfg = config(server, variant, broker, probe_id + "-naive", topic="nines.naive")
    naive = ClosedLoop(open_transport(naive_cfg), interval_s=1 / RATE).start()
    stall = ctrl_z(agent, server)
    naive_us = np.array(naive.stop())
    echoes, _ = records_of(broker.bootstrap, probe_id)
    check_ctrl_z(agent, echoes, stall, naive_us, acks=VARIANTS[variant][2])
    # the echo names the system; topic is the subject, channel, stream or queue; partition 0
    assert {(e.system, e.topic, e.partition, e.leader) for e in echoes} == {
        (server.system, "nines.probe", 0, 0)
    }


RESTART = ["nats", "redis", "rabbitmq"]


@pytest.mark.parametrize(("server", "variant"), [(v, v) for v in RESTART], indirect=["server"])
def test_server_restart_counts_the_outage_and_recovers(
    server: Server, variant: str, broker: EmbeddedBroker
) -> None:
    probe_id = f"restart-{variant}-{uuid.uuid4().hex[:6]}"
    agent = ProbeAgent(config(server, variant, broker, probe_id, loss_timeout="2s")).start()
    time.sleep(2)
    t_down = agent.clock.now_us()
    server.stop()
    t_gone = agent.clock.now_us()  # certainly down from here...
    time.sleep(1)
    t_back = agent.clock.now_us()  # ...until here (start() returns once it serves again)
    server.start()
    t_up = agent.clock.now_us()
    # room for the backlog of the outage to drain (RabbitMQ's is seconds long)
    time.sleep(6)
    agent.stop()
    stats = agent.stats()["partitions"][0]
    echoes, _ = records_of(broker.bootstrap, probe_id)
    n = assert_one_echo_per_message(echoes, 1)[0]  # one echo each, whatever befell it
    assert n == stats["sent"]
    lost = [e for e in echoes if e.lost]
    assert len(lost) == stats["lost"]  # every loss counted, each with its loss timeout
    assert all(e.end_to_end_us == 2_000_000 for e in lost)
    down_s = (t_back - t_gone) / 1e6
    # The outage shows: as losses and send errors, or (a client that buffers while it
    # reconnects) as latency of at least the time the server was certainly away.
    worst_s = max(e.end_to_end_us or 0 for e in echoes) / 1e6
    assert lost or stats["send_errors"] or worst_s >= down_s - 2 / RATE, (down_s, worst_s)
    assert all(t_down - 2_000_000 <= e.intended_us <= t_up for e in lost)
    recovered = [e for e in echoes if not e.lost and e.intended_us > t_up + 1_000_000]
    assert len(recovered) >= 2 * RATE, "the probe did not recover after the restart"
    print(
        f"\nrestart {variant}: down {down_s:.2f}s, sent={n} lost={len(lost)} "
        f"send_errors={stats['send_errors']} worst={worst_s:.3f}s recovered={len(recovered)}"
    )


@pytest.mark.parametrize(("server", "variant"), [(v, v) for v in RESTART], indirect=["server"])
def test_cli_sigterm_stops_cleanly_with_one_echo_per_message(
    server: Server, variant: str, broker: EmbeddedBroker, tmp_path: Path
) -> None:
    probe_id = f"term-{variant}-{uuid.uuid4().hex[:6]}"
    run = ProbeProcess(server.url, probe_id, tmp_path, "--echo-bootstrap", broker.bootstrap)
    try:
        run.ready()
        time.sleep(1)
        run.proc.send_signal(signal.SIGTERM)
        rc = run.proc.wait(15)
    finally:
        run.kill()
    err = run.stderr()
    assert rc == 0, err
    assert "guest:guest" not in err  # an amqp:// password is never printed
    counts = run.summary()
    assert counts, err
    echoes, hiccups = records_of(broker.bootstrap, probe_id)
    n = assert_one_echo_per_message(echoes, 1)
    assert n[0] == counts["sent"] == counts["received"]
    assert counts["lost"] == counts["unresolved"] == counts["echo_dropped"] == 0
    assert len(echoes) + len(hiccups) == counts["echo_records_published"]
    assert {e.system for e in echoes} == {server.system}
