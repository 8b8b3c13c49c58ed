"""Real nats-server, redis-server and rabbitmq-server, started for tests and ``nines compare``.

Each runs as our own child process (its own session, so SIGSTOP reaches all of it, as CTRL+Z
does) on free loopback ports with its data under a temp dir. They are the Debian packages'
servers (``make system-test-deps`` installs them); a missing one is a ``ServerMissing`` naming
the package.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

from testbroker.ports import free_port
from testbroker.process import group_pids, stop_and_wait

INSTALL = "apt-get install nats-server redis-server rabbitmq-server, or `make system-test-deps`"


class ServerMissing(RuntimeError):
    """The server is not installed here."""


def server_path(name: str) -> str | None:
    """The server's executable, or None: Debian puts some in /usr/sbin, off a user's PATH."""
    path = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"])
    return shutil.which(name, path=path)


def find_server(name: str) -> str:
    """The server's executable; ServerMissing (with how to install it) when there is none."""
    found = server_path(name)
    if found is None:
        raise ServerMissing(f"{name} not installed ({INSTALL})")
    return found


def port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.2)
        return s.connect_ex(("127.0.0.1", port)) == 0


class Server:
    """One server process: ``start``, ``pause``/``resume`` (SIGSTOP/SIGCONT), ``stop``."""

    system = ""
    #: The executable, as its Debian package installs it.
    binary = ""
    #: Seconds its start may take on a loaded 2-core machine.
    start_timeout_s = 20.0

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = tmp / f"{type(self).__name__}.log"

    @property
    def url(self) -> str:
        raise NotImplementedError

    def argv(self) -> list[str]:
        raise NotImplementedError

    def env(self) -> dict[str, str]:
        return dict(os.environ)

    def ready(self) -> bool:
        return port_open(self.port)

    def start(self) -> Server:
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                self.argv(),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self.env(),
                cwd=self.tmp,
                start_new_session=True,
            )
        deadline = time.monotonic() + self.start_timeout_s
        while not self.ready():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"{self.system} did not start: {self.log_tail()}")
            time.sleep(0.2)
        return self

    def log_tail(self) -> str:
        return self.log_path.read_text(errors="replace")[-2000:]

    def _signal(self, sig: int) -> None:
        assert self.proc is not None
        os.killpg(self.proc.pid, sig)

    def pause(self) -> None:
        """CTRL+Z: stop every process of the server; return once every thread has stopped (an
        Erlang VM answered a message 0.5 ms after kill() returned, inside the stall)."""
        assert self.proc is not None
        stop_and_wait(group_pids(self.proc.pid), lambda: self._signal(signal.SIGSTOP))

    def resume(self) -> None:
        self._signal(signal.SIGCONT)

    def stop(self, timeout_s: float = 20) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            self._signal(signal.SIGCONT)
            self._signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                self._signal(signal.SIGKILL)
            self.proc.wait(5)
        deadline = time.monotonic() + 10
        while port_open(self.port):  # until the port is free again (a restart reuses it)
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.system} stopped but port {self.port} still answers")
            time.sleep(0.1)


class NatsServer(Server):
    system = "nats"
    binary = "nats-server"

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    def argv(self) -> list[str]:
        binary = find_server(self.binary)
        store = self.tmp / "jetstream"
        return [binary, "-a", "127.0.0.1", "-p", str(self.port), "-js", "-sd", str(store)]

    def add_stream(self, subject: str) -> None:
        """A JetStream stream capturing ``subject`` (file storage: it survives a restart)."""
        import asyncio

        import nats

        async def add() -> None:
            nc = await nats.connect(self.url)
            await nc.jetstream().add_stream(name=subject.replace(".", "_"), subjects=[subject])
            await nc.close()

        asyncio.run(add())


class RedisServer(Server):
    system = "redis"
    binary = "redis-server"

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def argv(self) -> list[str]:
        binary = find_server(self.binary)
        return [
            binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
            "--appendonly", "no", "--dir", str(self.tmp),
        ]  # fmt: skip


class RabbitServer(Server):
    """rabbitmq-server as a node of its own: name, ports, data, logs and cookie under ``tmp``."""

    system = "rabbitmq"
    binary = "rabbitmq-server"
    start_timeout_s = 90.0

    def __init__(self, tmp: Path) -> None:
        super().__init__(tmp)
        self.dist_port, self.epmd_port = free_port(), free_port()
        (tmp / "rabbitmq.conf").write_text(
            f"listeners.tcp.default = 127.0.0.1:{self.port}\nloopback_users = none\n"
        )
        (tmp / "enabled_plugins").write_text("[].\n")

    @property
    def url(self) -> str:
        return f"amqp://guest:guest@127.0.0.1:{self.port}/%2F"

    def argv(self) -> list[str]:
        find_server(self.binary)
        # the package's /usr/sbin wrapper re-runs it as user rabbitmq; this is the script itself
        return ["/usr/lib/rabbitmq/bin/rabbitmq-server"]

    def env(self) -> dict[str, str]:
        t = self.tmp
        return {
            **os.environ,
            "HOME": str(t),  # the Erlang cookie
            "RABBITMQ_NODENAME": f"nines{self.port}@localhost",
            "RABBITMQ_NODE_IP_ADDRESS": "127.0.0.1",
            "RABBITMQ_NODE_PORT": str(self.port),
            "RABBITMQ_DIST_PORT": str(self.dist_port),
            "ERL_EPMD_PORT": str(self.epmd_port),
            "RABBITMQ_MNESIA_BASE": str(t / "mnesia"),
            "RABBITMQ_LOG_BASE": str(t / "log"),
            "RABBITMQ_ENABLED_PLUGINS_FILE": str(t / "enabled_plugins"),
            "RABBITMQ_CONFIG_FILE": str(t / "rabbitmq.conf"),
        }

    def declare_queue(self, name: str) -> None:
        import pika

        conn = pika.BlockingConnection(pika.URLParameters(self.url))
        conn.channel().queue_declare(name, durable=True)
        conn.close()

    def stop(self, timeout_s: float = 30) -> None:
        super().stop(timeout_s)

    def close(self) -> None:
        """Stop, and end the epmd daemon the node started (it leaves our session)."""
        self.stop()
        epmd = shutil.which("epmd")
        if epmd:
            subprocess.run(
                [epmd, "-kill"],
                env={**os.environ, "ERL_EPMD_PORT": str(self.epmd_port)},
                capture_output=True,
                timeout=10,
            )


#: The system a ``nines probe --bootstrap`` URL names → its server.
SERVERS: dict[str, type[Server]] = {
    "nats": NatsServer,
    "redis": RedisServer,
    "rabbitmq": RabbitServer,
}
