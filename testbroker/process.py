"""``EmbeddedBroker``: start ``nines broker`` (mock or tansu) as a subprocess; drive its faults.

The cluster always runs in its own process: a mock cluster inside a client process shares that
client's threads and (in our trial) acked messages it never stored.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import Literal

from testbroker.control import ControlError, ReadyInfo, end_process, send

#: Seconds a SIGSTOP may take to stop every thread: one thread of each process takes the stop
#: and stops the others, and on a loaded machine it may wait to be scheduled while the other
#: threads still serve requests (seen: a Kafka broker acknowledged a produce 70 ms after kill()).
STOP_TIMEOUT_S = 5.0


def _threads_stopped(pids: list[int]) -> bool:
    """True once every thread of every process in ``pids`` is stopped (state T)."""
    for pid in pids:
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue  # gone
        for tid in tasks:
            try:
                with open(f"/proc/{pid}/task/{tid}/stat") as f:
                    state = f.read().rsplit(")", 1)[1].split()[0]
            except (OSError, IndexError):
                continue
            if state not in ("T", "t", "Z", "X"):
                return False
    return True


def group_pids(pgid: int) -> list[int]:
    """Every process of process group ``pgid``."""
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError):
                if os.getpgid(int(entry)) == pgid:
                    out.append(int(entry))
    return out


def stop_and_wait(pids: list[int], signal_all: Callable[[], None]) -> None:
    """Send the stop (``signal_all``) and return once every thread of ``pids`` has stopped, so
    a caller's clock reading after it is a time the brokers were certainly stopped."""
    signal_all()
    deadline = time.monotonic() + STOP_TIMEOUT_S
    while not _threads_stopped(pids) and time.monotonic() < deadline:
        time.sleep(0.001)


class BrokerStartError(RuntimeError):
    """``nines broker`` exited or did not become ready in time; carries its stderr."""


class EmbeddedBroker:
    """A running ``nines broker`` subprocess with a Python handle on its control socket."""

    faults = True

    def __init__(
        self,
        brokers: int | None = None,
        topics: Sequence[tuple[str, int] | tuple[str, int, int]] | None = None,
        port: int | None = None,
        ready_timeout_s: float = 30.0,
        engine: Literal["mock", "tansu", "kafka"] = "mock",
        sasl: bool = False,
        warm_up: bool = True,
    ) -> None:
        self.engine = engine
        #: tansu is one real broker whose faults are signals only (rtt/down/up/leader raise)
        self.faults = engine != "tansu"
        self.brokers = brokers if brokers is not None else (1 if engine == "tansu" else 3)
        self.sasl = sasl
        self.warm_up = warm_up
        if engine == "kafka" and ready_timeout_s < 180.0:
            ready_timeout_s = 180.0  # JVMs formatting and starting on a loaded 2-core machine
        self.topics = list(topics) if topics is not None else None
        self.port = port
        self.ready_timeout_s = ready_timeout_s
        self._dir = Path(tempfile.mkdtemp(prefix="nines-broker-"))
        self.ready_file: Path = self._dir / "ready"
        self._stderr_path = self._dir / "stderr"
        self._proc: subprocess.Popen[bytes] | None = None
        self._info: ReadyInfo | None = None

    def command(self) -> list[str]:
        """The argv this handle runs (useful in failure messages and docs)."""
        argv = [sys.executable, "-m", "monitor", "broker", "--brokers", str(self.brokers)]
        if self.engine != "mock":
            argv += ["--engine", self.engine]
        for spec in self.topics or ():
            argv += ["--topic", ":".join(str(part) for part in spec)]
        if self.sasl:
            argv.append("--sasl")
        if self.port is not None:
            argv += ["--port", str(self.port)]
        if not self.warm_up:
            argv.append("--no-warm-up")
        return [*argv, "--ready-file", str(self.ready_file)]

    def start(self) -> EmbeddedBroker:
        """Launch the process and block until its ready file appears (or fail with its stderr)."""
        if self._proc is not None:
            raise RuntimeError("already started")
        env = dict(os.environ)
        root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
        with self._stderr_path.open("wb") as err:
            # its own process group, as a shell's job is: pause() stops the whole group
            self._proc = subprocess.Popen(
                self.command(),
                stdout=subprocess.DEVNULL,
                stderr=err,
                env=env,
                start_new_session=True,
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

    def stop(self, timeout_s: float | None = None) -> int | None:
        """SIGTERM (after SIGCONT, in case it is paused); SIGKILL if it hangs. Returns exit code."""
        proc, self._proc = self._proc, None
        if proc is None:
            return None
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGCONT)  # a paused group (or one broker of it)
        if timeout_s is None:
            timeout_s = 90.0 if self.engine == "kafka" else 10.0
        code = end_process(proc, timeout_s)
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

    def ctl(self, *words: str, timeout_s: float = 180.0) -> str:
        """Send one control command; return its data, raise ControlError on ``error: ...``."""
        return send(self.info.control, *words, timeout_s=timeout_s)

    def broker_pid(self, broker: int) -> int:
        """The process of one broker (``ctl pid``): SIGSTOP it to stall that broker alone."""
        return int(self.ctl("pid", str(broker)))

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
        """A broker joins (mock: its partitions' replicas are re-placed); its id."""
        broker = int(self.ctl("add-broker"))
        self.brokers = broker
        return broker

    def set_leader(self, topic: str, partition: int, broker: int) -> None:
        """Move ``topic[partition]``'s leader to ``broker``."""
        self.ctl("leader", topic, str(partition), str(broker))

    def create_topic(self, name: str, partitions: int, replication: int | None = None) -> None:
        """Create a topic with leaders spread over the brokers (an RF on Kafka only)."""
        if replication is None:
            self.ctl("create-topic", name, str(partitions))
        else:
            self.ctl("create-topic-rf", name, str(partitions), str(replication))

    def sasl_client(self) -> tuple[str, Path]:
        """Kafka ``--sasl``: the SASL_SSL bootstrap and the client config file naming it."""
        bootstrap, path = self.ctl("sasl").split(" ", 1)
        return bootstrap, Path(path)

    def pause(self) -> None:
        """SIGSTOP the whole cluster (the Ctrl+Z test): clients stall, nothing answers.

        The signal goes to ``nines broker``'s process group, as a terminal's Ctrl+Z does:
        the mock's one process, Tansu's child, every Kafka JVM. Returns once every thread of
        them has stopped."""
        stop_and_wait(group_pids(self.pid), lambda: os.killpg(self.pid, signal.SIGSTOP))

    def resume(self) -> None:
        """SIGCONT after :meth:`pause` (``fg``)."""
        os.killpg(self.pid, signal.SIGCONT)

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
