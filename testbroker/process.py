"""``EmbeddedBroker``: start ``nines broker`` (mock or tansu) as a subprocess; drive its faults.

The cluster always runs in its own process: a mock cluster inside a client process shares that
client's threads and (in our trial) acked messages it never stored.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Literal

from testbroker.control import ControlError, ReadyInfo, end_process, send


class BrokerStartError(RuntimeError):
    """``nines broker`` exited or did not become ready in time; carries its stderr."""


class EmbeddedBroker:
    """A running ``nines broker`` subprocess with a Python handle on its control socket."""

    faults = True

    def __init__(
        self,
        brokers: int | None = None,
        topics: Sequence[tuple[str, int]] | None = None,
        port: int | None = None,
        ready_timeout_s: float = 30.0,
        engine: Literal["mock", "tansu"] = "mock",
    ) -> None:
        self.engine = engine
        #: tansu is one real broker whose faults are signals only (rtt/down/up/leader raise)
        self.faults = engine == "mock"
        self.brokers = brokers if brokers is not None else (3 if engine == "mock" else 1)
        self.topics = list(topics) if topics is not None else None
        self.port = port
        self.ready_timeout_s = ready_timeout_s
        self._dir = Path(tempfile.mkdtemp(prefix="nines-broker-"))
        self.ready_file: Path = self._dir / "ready"
        self._stderr_path = self._dir / "stderr"
        self._proc: subprocess.Popen[bytes] | None = None
        self._info: ReadyInfo | None = None
        self.last_stderr = ""

    def command(self) -> list[str]:
        """The argv this handle runs (useful in failure messages and docs)."""
        argv = [sys.executable, "-m", "monitor", "broker", "--brokers", str(self.brokers)]
        if self.engine != "mock":
            argv += ["--engine", self.engine]
        for name, partitions in self.topics or ():
            argv += ["--topic", f"{name}:{partitions}"]
        if self.port is not None:
            argv += ["--port", str(self.port)]
        return [*argv, "--ready-file", str(self.ready_file)]

    def start(self) -> EmbeddedBroker:
        """Launch the process and block until its ready file appears (or fail with its stderr)."""
        if self._proc is not None:
            raise RuntimeError("already started")
        env = dict(os.environ)
        root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
        with self._stderr_path.open("wb") as err:
            self._proc = subprocess.Popen(
                self.command(), stdout=subprocess.DEVNULL, stderr=err, env=env
            )
        deadline = time.monotonic() + self.ready_timeout_s
        while not self.ready_file.exists():
            if self._proc.poll() is not None:
                raise BrokerStartError(
                    f"nines broker exited with {self._proc.returncode}: {self.stderr().strip()}"
                )
            if time.monotonic() > deadline:
                self.stop()
                raise BrokerStartError(f"nines broker not ready after {self.ready_timeout_s} s")
            time.sleep(0.01)
        self._info = ReadyInfo.read(self.ready_file)
        return self

    def stderr(self) -> str:
        """Everything the broker process wrote to stderr so far."""
        try:
            return self._stderr_path.read_text(errors="replace")
        except OSError:
            return ""

    def stop(self, timeout_s: float = 10.0) -> int | None:
        """SIGTERM (after SIGCONT, in case it is paused); SIGKILL if it hangs. Returns exit code."""
        proc, self._proc = self._proc, None
        if proc is None:
            return None
        code = end_process(proc, timeout_s)
        self.last_stderr = self.stderr()
        shutil.rmtree(self._dir, ignore_errors=True)
        return code

    @property
    def running(self) -> bool:
        """True while the broker process is alive."""
        return self._proc is not None and self._proc.poll() is None

    @property
    def info(self) -> ReadyInfo:
        """Parsed ready file of the running broker."""
        if self._info is None:
            raise RuntimeError("broker not started")
        return self._info

    @property
    def bootstrap(self) -> str:
        """``bootstrap.servers`` for Kafka clients."""
        return self.info.bootstrap

    @property
    def pid(self) -> int:
        """Process id of the broker (for signals)."""
        return self.info.pid

    def ctl(self, *words: str) -> str:
        """Send one control command; return its data, raise ControlError on ``error: ...``."""
        return send(self.info.control, *words)

    def rtt(self, broker: int, rtt_ms: int) -> None:
        """Delay every response of ``broker`` by ``rtt_ms`` (0 clears; mock engine only)."""
        self.ctl("rtt", str(broker), str(rtt_ms))

    def down(self, broker: int) -> None:
        """Disconnect ``broker``'s clients and refuse new connections."""
        self.ctl("down", str(broker))

    def up(self, broker: int) -> None:
        """Let ``broker`` accept connections again."""
        self.ctl("up", str(broker))

    def add_broker(self) -> int:
        """A broker joins the mock cluster (its partitions' replicas are re-placed); its id."""
        broker = int(self.ctl("add-broker"))
        self.brokers = broker
        return broker

    def set_leader(self, topic: str, partition: int, broker: int) -> None:
        """Move ``topic[partition]``'s leader to ``broker``."""
        self.ctl("leader", topic, str(partition), str(broker))

    def create_topic(self, name: str, partitions: int) -> None:
        """Create a topic with leaders spread over the brokers."""
        self.ctl("create-topic", name, str(partitions))

    def pause(self) -> None:
        """SIGSTOP the whole cluster (the Ctrl+Z test): clients stall, nothing answers.

        The ready file's pid is the process serving Kafka: ``nines broker`` itself for the
        mock, the Tansu child for tansu."""
        os.kill(self.pid, signal.SIGSTOP)

    def resume(self) -> None:
        """SIGCONT after :meth:`pause`."""
        os.kill(self.pid, signal.SIGCONT)

    def __enter__(self) -> EmbeddedBroker:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __del__(self) -> None:
        if getattr(self, "_proc", None) is not None:
            self.stop(timeout_s=2)


__all__ = ["BrokerStartError", "ControlError", "EmbeddedBroker"]
