"""The real servers of ``testbroker.servers`` for tests: missing, one skips locally and fails
under CI=true (``real_components.require_tool``)."""

from __future__ import annotations

from typing import TypeVar

from real_components import require_tool

from testbroker.servers import INSTALL, NatsServer, RabbitServer, RedisServer, Server, server_path

__all__ = ["NatsServer", "RabbitServer", "RedisServer", "Server", "require"]

S = TypeVar("S", bound=Server)


def require(server: S) -> S:
    """``server``, once its executable is known to be installed (else skip, or fail in CI)."""
    if server_path(server.binary) is None:
        require_tool(server.binary, INSTALL)
    return server
