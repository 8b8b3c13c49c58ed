"""A Spark standalone cluster on loopback, from the pyspark wheel's own classes (no download).

One master and N workers, each ``bin/spark-class`` of the installed pyspark in its own process
group: the standalone-cluster test kills a worker mid-run, and the bench measures the job on a
real cluster beside ``local[N]``. Workers inherit this process's environment, with this
checkout first on ``PYTHONPATH``: their executors' Python workers import it (the product's
packages, and the benches' replay sources under ``bench``, which no install carries).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

#: This checkout: the executors' Python workers must import ``bench`` as well as the product.
ROOT = Path(__file__).resolve().parents[1]
#: A master and a worker start in about 10 s on an idle 2-core machine; far longer when loaded.
START_TIMEOUT_S = 180.0


def free_port() -> int:
    """A TCP port free on loopback now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def spark_home() -> str:
    """The pyspark wheel's directory: it holds ``bin/spark-class`` and ``jars/``."""
    import pyspark

    return str(Path(pyspark.__file__).resolve().parent)


def loopback_env() -> dict[str, str]:
    """This environment with Spark bound to loopback (driver, master, workers, executors)."""
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    return {
        **os.environ,
        "SPARK_HOME": spark_home(),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYTHONPATH": path,
    }


@dataclass
class StandaloneCluster:
    """``start()`` a master and ``workers`` workers of ``cores`` each; ``stop()`` ends them."""

    workdir: Path
    workers: int = 2
    cores: int = 1
    memory: str = "1200m"
    port: int = field(default_factory=free_port)
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def url(self) -> str:
        """The master URL for ``--master``."""
        return f"spark://127.0.0.1:{self.port}"

    def _launch(self, name: str, args: list[str]) -> subprocess.Popen[bytes]:
        log = open(self.workdir / f"{name}.log", "ab")  # noqa: SIM115 (the child keeps it)
        cmd = [str(Path(spark_home()) / "bin" / "spark-class"), *args]
        proc = subprocess.Popen(
            cmd,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=loopback_env(),
            start_new_session=True,  # its executors are in its group: stop() ends them too
        )
        self.procs.append(proc)
        return proc

    def _wait_log(self, name: str, text: str, proc: subprocess.Popen[bytes]) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        log = self.workdir / f"{name}.log"
        while time.monotonic() < deadline:
            if text in log.read_text(errors="replace"):
                return
            if proc.poll() is not None:
                raise RuntimeError(f"{name} exited {proc.returncode}: {log.read_text()[-1500:]}")
            time.sleep(0.3)
        raise RuntimeError(f"{name} did not start within {START_TIMEOUT_S:.0f} s")

    def start(self) -> StandaloneCluster:
        """Start the master, then the workers; returns once every worker has registered."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        master = self._launch(
            "master",
            ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
             "--port", str(self.port), "--webui-port", str(free_port())],
        )  # fmt: skip
        self._wait_log("master", "I have been elected leader", master)
        for i in range(self.workers):
            self._launch(
                f"worker-{i}",
                ["org.apache.spark.deploy.worker.Worker", self.url, "--host", "127.0.0.1",
                 "--cores", str(self.cores), "--memory", self.memory,
                 "--webui-port", str(free_port()), "--work-dir", str(self.workdir / f"work-{i}")],
            )  # fmt: skip
        for i in range(self.workers):
            self._wait_log(f"worker-{i}", "Successfully registered with master", self.procs[1 + i])
        return self

    def worker(self, i: int) -> subprocess.Popen[bytes]:
        """Worker ``i``'s process."""
        return self.procs[1 + i]

    def kill_worker(self, i: int) -> None:
        """SIGKILL worker ``i`` and its executor (its process group): a lost machine."""
        proc = self.worker(i)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)

    def stop(self) -> None:
        """End every process this cluster started (workers first), by process group."""
        for proc in reversed(self.procs):
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    continue
        for proc in reversed(self.procs):
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
