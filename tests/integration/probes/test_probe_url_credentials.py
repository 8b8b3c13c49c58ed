"""A target URL's typed credentials reach the real server: redis-server with ``requirepass``
and nats-server with a token take the probe's URL, password and all, though the config shows
none of it; a wrong one is refused (the control: the server does check)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from real_servers import NatsServer, RedisServer, Server, require

from core.config import ConfigError
from probes import ProbeConfig
from probes.systems import open_transport

SECRET = "Zq9-typed-pw.7"


class PasswordRedis(RedisServer):
    def argv(self) -> list[str]:
        return [*super().argv(), "--requirepass", SECRET]


class TokenNats(NatsServer):
    def argv(self) -> list[str]:
        return [*super().argv(), "--auth", SECRET]


@pytest.fixture(params=[PasswordRedis, TokenNats], ids=["redis", "nats"])
def server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Server]:
    started = require(request.param(tmp_path)).start()
    try:
        yield started
    finally:
        started.stop()


def url_with(server: Server, secret: str) -> str:
    scheme, _, rest = server.url.partition("://")
    return f"{scheme}://:{secret}@{rest}" if scheme == "redis" else f"{scheme}://{secret}@{rest}"


def config_for(url: str) -> ProbeConfig:
    return ProbeConfig.model_validate({"bootstrap": url, "echo_bootstrap": "127.0.0.1:9"})


def test_the_transport_connects_with_the_typed_secret(
    server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = config_for(url_with(server, SECRET))
    assert SECRET not in repr(config) and SECRET not in config.model_dump_json()
    transport = open_transport(config)
    try:
        transport.discover()  # connects (and authenticates) or raises ConfigError
    finally:
        transport.release()
    import probes.nats

    monkeypatch.setattr(probes.nats, "CONNECT_TIMEOUT_S", 1.0)  # a refusal is retried till then
    transport = open_transport(config_for(url_with(server, "Zq9-wrong-pw")))
    try:
        with pytest.raises(ConfigError) as refused:
            transport.discover()
    finally:
        transport.release()
    assert "Zq9-wrong-pw" not in str(refused.value)
