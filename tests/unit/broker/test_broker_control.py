"""The control protocol and ready file, against a real in-process librdkafka mock cluster."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from testbroker.control import ReadyInfo, write_ready
from testbroker.mock import MockCluster, MockError, version
from testbroker.server import Controller, create_topic


@pytest.fixture
def cluster() -> Iterator[MockCluster]:
    with MockCluster(3) as mc:
        yield mc


def test_binding_loads_bundled_librdkafka_and_listens(cluster: MockCluster) -> None:
    assert version().count(".") >= 2
    addrs = cluster.bootstraps.split(",")
    assert len(addrs) == 3
    for addr in addrs:  # each broker accepts a real TCP connection
        host, _, port = addr.rpartition(":")
        with socket.create_connection((host, int(port)), timeout=5):
            pass


def test_mock_errors_carry_librdkafka_text(cluster: MockCluster) -> None:
    create_topic(cluster, "t", 2)
    with pytest.raises(MockError, match="already exists"):
        cluster.create_topic("t", 2)
    with pytest.raises(MockError, match="Unknown topic or partition"):
        cluster.set_leader("t", 5, 1)
    with pytest.raises(MockError, match=r"broker must be 1\.\.3"):
        cluster.set_rtt(4, 10)
    with pytest.raises(MockError, match="brokers must be >= 1"):
        MockCluster(0)


def test_controller_replies_ok_or_one_error_line(cluster: MockCluster) -> None:
    ctl = Controller(cluster, "boot:1", {"nines.probe": 3})
    assert ctl.handle("ping") == "ok"
    assert ctl.handle("bootstrap") == "ok boot:1"
    assert ctl.handle("rtt 2 40") == "ok"
    assert ctl.handle("rtt -1 0") == "ok"  # -1: every broker
    assert ctl.handle("down 3") == "ok"
    assert ctl.handle("up 3") == "ok"
    assert ctl.handle("create-topic orders 4") == "ok"
    assert ctl.handle("leader orders 3 2") == "ok"
    for line, reply in [
        ("", "error: empty command"),
        ("leader typo 0 1", "error: unknown topic 'typo'"),
        ("leader orders 4 1", "error: orders has partitions 0..3 (got 4)"),
        ("create-topic orders 4", "error: create topic orders: Broker: Topic already exists"),
        ("create-topic x 0", "error: create-topic x 0: partitions must be 1..1024"),
        ("rtt 2 -5", "error: rtt must be >= 0 ms"),
        ("down 0", "error: broker must be 1..3"),
        ("up", "error: up takes 1 argument(s), got 0"),
        ("reboot 1", "error: unknown command 'reboot'"),
    ]:
        got = ctl.handle(line)
        assert got.startswith(reply) and "\n" not in got, (line, got)


def test_ready_file_roundtrip_is_atomic(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "ready"
    info = ReadyInfo("127.0.0.1:1,127.0.0.1:2", ("127.0.0.1", 3), 42)
    write_ready(path, info)
    assert ReadyInfo.read(path) == info
    assert path.read_text().splitlines()[0] == info.bootstrap  # `head -n1` gives the bootstrap
    assert [p.name for p in path.parent.iterdir()] == ["ready"]  # no temp file left behind
    path.write_text("half")
    with pytest.raises(ValueError, match="not a nines broker ready file"):
        ReadyInfo.read(path)


def test_add_broker_joins_the_next_id_and_is_refused_with_fixed_ports(cluster: MockCluster) -> None:
    ctl = Controller(cluster, "boot:1", {})
    assert ctl.handle("add-broker") == "ok 4"
    assert cluster.brokers == 4 and ctl.handle("rtt 4 10") == "ok"  # broker 4 is addressable
    assert ctl.handle("add-broker 5") == "error: add-broker takes 0 argument(s), got 1"
    fixed = Controller(cluster, "boot:1", {}, fixed_ports=True)
    assert fixed.handle("add-broker").startswith("error: add-broker: not with --port")
    assert cluster.brokers == 4
