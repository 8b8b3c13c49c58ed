"""Server ports come from outside the kernel's ephemeral range, so a restart can rebind them."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from testbroker import ports


def test_ports_are_free_distinct_and_never_a_clients_local_port() -> None:
    low, high = ports.ephemeral_range()
    issued = [ports.free_port() for _ in range(50)]
    assert len(set(issued)) == 50
    for port in issued:
        assert not low <= port <= high
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))  # still free: we only chose it


def test_a_taken_port_is_never_chosen(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ports, "_issued", set())
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", ports.free_port()))
        listener.listen()
        taken = listener.getsockname()[1]
        ports._issued.clear()
        monkeypatch.setattr(ports, "server_port_range", lambda: range(taken, taken + 1))
        with pytest.raises(RuntimeError, match=f"no free port in {taken}-{taken}"):
            ports.free_port()


def test_the_range_follows_the_kernel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    proc = tmp_path / "ip_local_port_range"
    proc.write_text("20000\t60999\n")
    monkeypatch.setattr(ports, "EPHEMERAL_RANGE", proc)
    assert ports.server_port_range() == range(10_000, 20_000)
    proc.write_text("1024\t40000\n")  # little room below: use the ports above
    assert ports.server_port_range() == range(40_001, 65_536)
    monkeypatch.setattr(ports, "EPHEMERAL_RANGE", tmp_path / "absent")
    assert ports.ephemeral_range() == (32768, 60999)
