"""A real Kubernetes control plane on loopback: etcd, kube-apiserver, kube-controller-manager,
kube-scheduler and kwok (fake nodes that run no containers), started and stopped by pid.

Every component listens on 127.0.0.1 only (the API server with ``--advertise-address``) and
talks only to the others; certificates are made at start (``testkube.pki``). The binaries are
``testkube.build``'s; etcd is Debian's ``etcd-server``.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import ssl
import subprocess
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from testkube.build import bin_dir, missing
from testkube.pki import Pki, make_pki

#: The API server is ready about 3 s after start on an idle machine; a loaded one takes longer.
READY_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 15.0
#: Services get cluster IPs from here; nothing is ever sent to them (no kube-proxy runs).
SERVICE_CIDR = "10.96.0.0/16"
#: kwok's fake nodes and the stage files it runs them by (from its Go module, next to the build).
KWOK_NODE_ANNOTATION = "kwok.x-k8s.io/node"
NODE_LEASE_S = 40


class ControlPlaneError(RuntimeError):
    """A component is missing, exited or never became ready; the message says which, once."""


@dataclass
class ControlPlane:
    workdir: Path
    server: str
    pki: Pki
    kubeconfig: Path
    pids: dict[str, int] = field(default_factory=dict)
    _procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    def log_tail(self, name: str, lines: int = 5) -> str:
        """The last lines a component wrote, for a failure message."""
        path = self.workdir / f"{name}.log"
        text = path.read_text(errors="replace") if path.exists() else ""
        return " | ".join(text.strip().splitlines()[-lines:])

    def check_alive(self) -> None:
        """Raise when a component has exited (its log's last lines say why)."""
        for name, proc in self._procs.items():
            if proc.poll() is not None:
                raise ControlPlaneError(
                    f"{name} exited with {proc.returncode}: {self.log_tail(name)}"
                )

    def stop(self) -> None:
        """SIGTERM each component by pid, the last started first; SIGKILL what outlives it."""
        for name in reversed(list(self._procs)):
            proc = self._procs[name]
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=STOP_TIMEOUT_S)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout=STOP_TIMEOUT_S)
        self._procs.clear()


def free_port() -> int:
    """A TCP port on 127.0.0.1 nobody listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _kubeconfig(path: Path, server: str, pki: Pki) -> None:
    path.write_text(
        "apiVersion: v1\nkind: Config\n"
        f"clusters:\n- name: nines\n  cluster: {{server: '{server}', "
        f"certificate-authority: '{pki.ca}'}}\n"
        f"users:\n- name: admin\n  user: {{client-certificate: '{pki.admin_cert}', "
        f"client-key: '{pki.admin_key}'}}\n"
        "contexts:\n- name: nines\n  context: {cluster: nines, user: admin}\n"
        "current-context: nines\n"
    )


def _wait_ready(cp: ControlPlane, url: str, deadline: float) -> None:
    """Poll ``url`` (an API server health endpoint) with the admin certificate until 200 ok."""
    ctx = ssl.create_default_context(cafile=str(cp.pki.ca))
    ctx.load_cert_chain(str(cp.pki.admin_cert), str(cp.pki.admin_key))
    last = "no answer"
    while time.monotonic() < deadline:
        cp.check_alive()
        try:
            with urllib.request.urlopen(url, context=ctx, timeout=5) as resp:
                if resp.status == 200:
                    return
                last = f"HTTP {resp.status}"
        except OSError as exc:
            last = str(exc)
        time.sleep(0.25)
    raise ControlPlaneError(f"{url} not ready within {READY_TIMEOUT_S:.0f} s: {last}")


def _wait_port(cp: ControlPlane, port: int, deadline: float) -> None:
    while time.monotonic() < deadline:
        cp.check_alive()
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise ControlPlaneError(f"127.0.0.1:{port} not listening within {READY_TIMEOUT_S:.0f} s")


def find_etcd() -> str:
    """Debian's etcd (``etcd-server``), or one named by ``NINES_ETCD``."""
    etcd = os.environ.get("NINES_ETCD") or shutil.which("etcd")
    if not etcd:
        raise ControlPlaneError("etcd not installed (apt-get install etcd-server)")
    return etcd


def start(workdir: Path) -> ControlPlane:
    """Start every component under ``workdir`` and return once the API server is ready.

    Nodes are the caller's to create (``kwok.x-k8s.io/node: fake`` marks one kwok manages);
    on any failure what was started is stopped again.
    """
    if missing():
        raise ControlPlaneError(
            f"{', '.join(missing())} not built: run `python -m testkube.build` (make kube-bins)"
        )
    etcd = find_etcd()
    bins = bin_dir()
    workdir.mkdir(parents=True, exist_ok=True)
    pki = make_pki(workdir / "pki")
    api_port = free_port()
    server = f"https://127.0.0.1:{api_port}"
    cp = ControlPlane(workdir, server, pki, workdir / "kubeconfig")
    _kubeconfig(cp.kubeconfig, server, pki)

    def spawn(name: str, argv: list[str]) -> None:
        log = (workdir / f"{name}.log").open("wb")
        proc = subprocess.Popen(
            argv,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=workdir,
        )
        log.close()
        cp._procs[name] = proc
        cp.pids[name] = proc.pid

    deadline = time.monotonic() + READY_TIMEOUT_S
    try:
        # etcd's data on tmpfs where there is one: its fsyncs are most of a write's cost
        shm = Path("/dev/shm")
        data = Path(os.environ.get("NINES_ETCD_DATA_DIR", ""))
        if not data.name:
            base = shm if shm.is_dir() and os.access(shm, os.W_OK) else workdir
            data = base / f"nines-etcd-{os.getpid()}-{api_port}"
        client, peer = free_port(), free_port()
        spawn("etcd", [
            etcd, "--name=nines", f"--data-dir={data}",
            f"--listen-client-urls=http://127.0.0.1:{client}",
            f"--advertise-client-urls=http://127.0.0.1:{client}",
            f"--listen-peer-urls=http://127.0.0.1:{peer}",
            f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}",
            f"--initial-cluster=nines=http://127.0.0.1:{peer}",
            "--initial-cluster-state=new", "--logger=zap", "--log-level=warn",
        ])  # fmt: skip
        cp.workdir.joinpath("etcd-data").write_text(str(data))
        _wait_port(cp, client, deadline)
        spawn("kube-apiserver", [
            str(bins / "kube-apiserver"),
            f"--etcd-servers=http://127.0.0.1:{client}",
            "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
            f"--secure-port={api_port}",
            f"--tls-cert-file={pki.serving_cert}", f"--tls-private-key-file={pki.serving_key}",
            f"--client-ca-file={pki.ca}",
            f"--service-account-key-file={pki.sa_pub}",
            f"--service-account-signing-key-file={pki.sa_key}",
            "--service-account-issuer=https://kubernetes.default.svc",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            "--authorization-mode=Node,RBAC", "--allow-privileged=false",
            # Debian's etcd 3.4.23 predates watch progress requests (3.4.31), so the server can
            # not serve watch-list streams; refused up front, clients list then watch (else
            # kwok's streams fail inside and it sees pods only on retries, 10-60 s late)
            "--feature-gates=WatchList=false",
            f"--cert-dir={workdir / 'pki'}", "--profiling=false", "--v=1",
        ])  # fmt: skip
        _wait_ready(cp, f"{server}/readyz", deadline)
        kubeconfig = f"--kubeconfig={cp.kubeconfig}"
        spawn("kube-controller-manager", [
            str(bins / "kube-controller-manager"), kubeconfig,
            "--bind-address=127.0.0.1", "--secure-port=0", "--leader-elect=false",
            f"--service-account-private-key-file={pki.sa_key}", f"--root-ca-file={pki.ca}",
            "--use-service-account-credentials=false", "--profiling=false", "--v=1",
        ])  # fmt: skip
        spawn("kube-scheduler", [
            str(bins / "kube-scheduler"), kubeconfig,
            "--bind-address=127.0.0.1", "--secure-port=0", "--leader-elect=false",
            "--profiling=false", "--v=1",
        ])  # fmt: skip
        spawn("kwok", [
            str(bins / "kwok"), kubeconfig, f"--config={bins / 'kwok-stages.yaml'}",
            "--manage-all-nodes=false",
            f"--manage-nodes-with-annotation-selector={KWOK_NODE_ANNOTATION}=fake",
            "--node-ip=127.0.0.1",
            # renew each node's Lease: without one the node controller marks it unreachable
            # after its grace period (about 50 s) and taints it until the next status patch
            f"--node-lease-duration-seconds={NODE_LEASE_S}",
        ])  # fmt: skip
    except BaseException:
        cp.stop()
        remove_data(cp)
        raise
    return cp


def remove_data(cp: ControlPlane) -> None:
    """Delete etcd's data directory (after ``stop``)."""
    marker = cp.workdir / "etcd-data"
    if marker.exists():
        shutil.rmtree(marker.read_text(), ignore_errors=True)
