"""Loopback ports for the servers we start, chosen outside the kernel's ephemeral range.

A port from ``bind(port 0)`` comes from the ephemeral range, the same range the kernel draws
a client's local port from. A server we stop and start again on its port (a restart test) can
then find it taken: a client reconnecting during the outage may have been given that very port
as its own (on loopback a connect to a closed port can even connect to itself). RabbitMQ failed
to restart in CI that way (``eaddrinuse``). Ports below the range are never handed to clients.
"""

from __future__ import annotations

import random
import socket
from pathlib import Path

LOOPBACK = "127.0.0.1"
#: Where Linux keeps the range it draws clients' local ports from.
EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
#: The lowest port we use: above the well-known and most registered service ports.
LOWEST = 10_000

_issued: set[int] = set()


def ephemeral_range() -> tuple[int, int]:
    """The kernel's client port range (Linux's default where it cannot be read)."""
    try:
        low, high = (int(v) for v in EPHEMERAL_RANGE.read_text().split())
    except (OSError, ValueError):
        return 32768, 60999
    return low, high


def server_port_range() -> range:
    """Ports no client is given: below the ephemeral range, or above it when that is wider."""
    low, high = ephemeral_range()
    below, above = range(LOWEST, low), range(high + 1, 65536)
    return below if len(below) >= len(above) else above


def free_port(host: str = LOOPBACK) -> int:
    """A port free on ``host`` right now, outside the ephemeral range, not issued before here."""
    ports = server_port_range()
    for _ in range(500):
        port = random.choice(ports)
        if port in _issued:
            continue
        with socket.socket() as s:
            try:
                s.bind((host, port))
            except OSError:
                continue
        _issued.add(port)
        return port
    raise RuntimeError(f"no free port in {ports.start}-{ports.stop - 1} on {host}")


__all__ = ["ephemeral_range", "free_port", "server_port_range"]
