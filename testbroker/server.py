"""The ``nines broker`` process: mock cluster or Tansu child, fixed-port forwarder, control socket.

The ready-file format and the control protocol are described in :mod:`testbroker.control`.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import socketserver
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import ClassVar

from runtime import quiet_stop
from testbroker.config import BrokerConfig, parse_topic, parse_topic_rf
from testbroker.control import ReadyInfo, write_ready
from testbroker.kraft import KafkaEngineError, KraftCluster
from testbroker.mock import MockCluster, MockError
from testbroker.tansu import TansuBroker, TansuError

LOOPBACK = "127.0.0.1"
_CHUNK = 256 * 1024


class Forwarder:
    """Loopback TCP forwarder: a fixed port in front of a mock broker's random one."""

    def __init__(self, listen_port: int, target: tuple[str, int]) -> None:
        self.target = target
        self._sock = socket.create_server((LOOPBACK, listen_port), reuse_port=False)
        self.port: int = self._sock.getsockname()[1]
        self._closed = False
        threading.Thread(target=self._accept, name=f"fwd-{self.port}", daemon=True).start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._sock.accept()
            except OSError:
                return
            threading.Thread(target=self._connect, args=(client,), daemon=True).start()

    def _connect(self, client: socket.socket) -> None:
        try:
            upstream = socket.create_connection(self.target, timeout=5)
        except OSError:
            client.close()  # broker down: the client sees a closed connection, as on Kafka
            return
        upstream.settimeout(None)
        for s in (client, upstream):
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def close_both() -> None:
            client.close()
            upstream.close()

        done = threading.Barrier(2, action=close_both)
        for src, dst in ((client, upstream), (upstream, client)):
            threading.Thread(target=self._pump, args=(src, dst, done), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket, done: threading.Barrier) -> None:
        try:
            while data := src.recv(_CHUNK):
                dst.sendall(data)
        except OSError:
            pass
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)
        with contextlib.suppress(OSError):
            src.shutdown(socket.SHUT_RD)
        with contextlib.suppress(threading.BrokenBarrierError):
            done.wait()

    def close(self) -> None:
        """Stop accepting; open connections end when the cluster closes its side."""
        self._closed = True
        self._sock.close()


class _CommandTable:
    """Runs one control line against a table of commands; one line in, one line out."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._commands: dict[str, tuple[int, Callable[[list[str]], str]]] = {}

    def handle(self, line: str) -> str:
        """Run one command line; never raises (errors become ``error: ...``)."""
        words = line.split()
        if not words:
            return "error: empty command"
        entry = self._commands.get(words[0])
        if entry is None:
            return f"error: unknown command {words[0]!r} (try: {', '.join(self._commands)})"
        arity, fn = entry
        if len(words) - 1 != arity:
            return f"error: {words[0]} takes {arity} argument(s), got {len(words) - 1}"
        try:
            with self._lock:
                data = fn(words[1:])
        except (MockError, TansuError, KafkaEngineError, ValueError) as exc:
            return f"error: {exc}"
        return f"ok {data}" if data else "ok"


class Controller(_CommandTable):
    """Executes control-socket commands against the mock cluster."""

    def __init__(
        self,
        cluster: MockCluster,
        bootstrap: str,
        topics: dict[str, int],
        fixed_ports: bool = False,
    ) -> None:
        super().__init__()
        self.cluster = cluster
        self.bootstrap = bootstrap
        #: Topics this process created, name -> partitions. The mock would silently create a
        #: topic named in a leader change, so a typo must be refused here instead.
        self.topics = dict(topics)
        self._commands = {
            "ping": (0, lambda a: ""),
            "bootstrap": (0, lambda a: self.bootstrap),
            "rtt": (2, lambda a: self._do(cluster.set_rtt, int(a[0]), int(a[1]))),
            "down": (1, lambda a: self._do(cluster.set_down, int(a[0]))),
            "up": (1, lambda a: self._do(cluster.set_up, int(a[0]))),
            "leader": (3, lambda a: self._leader(a[0], int(a[1]), int(a[2]))),
            "create-topic": (2, lambda a: self._create(a[0], a[1])),
            "add-broker": (0, lambda a: self._add_broker(fixed_ports)),
            # every mock broker lives in this one process: stopping it stalls them all
            "pid": (1, lambda a: self._pid(int(a[0]))),
        }

    def _pid(self, broker: int) -> str:
        if not 1 <= broker <= self.cluster.brokers:
            raise ValueError(f"no broker {broker} (brokers are 1..{self.cluster.brokers})")
        return str(os.getpid())

    def _add_broker(self, fixed_ports: bool) -> str:
        if fixed_ports:
            raise ValueError("add-broker: not with --port (a new broker has no fixed port)")
        return str(self.cluster.add_broker())

    def _do(self, fn: Callable[..., None], *args: object) -> str:
        fn(*args)
        return ""

    def _create(self, name: str, partitions: str) -> str:
        try:
            topic, count = parse_topic(f"{name}:{partitions}")
        except ValueError as exc:
            raise ValueError(f"create-topic {name} {partitions}: {exc}") from None
        create_topic(self.cluster, topic, count)
        self.topics[topic] = count
        return ""

    def _leader(self, topic: str, partition: int, broker: int) -> str:
        count = self.topics.get(topic)
        if count is None:
            raise ValueError(f"unknown topic {topic!r} (create it first with create-topic)")
        if not 0 <= partition < count:
            raise ValueError(f"{topic} has partitions 0..{count - 1} (got {partition})")
        self.cluster.set_leader(topic, partition, broker)
        return ""


class TansuController(_CommandTable):
    """Control commands for the tansu engine: topics by the admin API; mock-only faults refused."""

    #: What each mock fault would need from Tansu, which has no fault-injection API.
    UNSUPPORTED: ClassVar[dict[str, tuple[int, str]]] = {
        "rtt": (2, "per-broker RTT"),
        "down": (1, "taking one broker of several down"),
        "up": (1, "bringing one broker of several up"),
        "leader": (3, "moving a partition's leader"),
        "add-broker": (0, "a broker joining"),
    }

    def __init__(self, broker: TansuBroker, topics: dict[str, int]) -> None:
        super().__init__()
        self.broker = broker
        self.topics = dict(topics)
        self._commands = {
            "ping": (0, lambda a: ""),
            "bootstrap": (0, lambda a: broker.bootstrap),
            "create-topic": (2, lambda a: self._create(a[0], a[1])),
            "pid": (1, lambda a: self._pid(int(a[0]))),
        }
        for name, (arity, what) in self.UNSUPPORTED.items():
            self._commands[name] = (arity, self._refuse(name, what))

    @staticmethod
    def _refuse(name: str, what: str) -> Callable[[list[str]], str]:
        def refuse(args: list[str]) -> str:
            raise ValueError(
                f"{name}: {what} is a mock-only fault; the tansu engine is one real broker "
                "(stall it with SIGSTOP/SIGCONT, or run nines broker --engine mock)"
            )

        return refuse

    def _pid(self, broker: int) -> str:
        if broker != 1:
            raise ValueError(f"no broker {broker} (the tansu engine is broker 1)")
        return str(self.broker.pid)

    def _create(self, name: str, partitions: str) -> str:
        try:
            topic, count = parse_topic(f"{name}:{partitions}")
        except ValueError as exc:
            raise ValueError(f"create-topic {name} {partitions}: {exc}") from None
        self.broker.create_topic(topic, count)
        self.topics[topic] = count
        return ""


class KafkaController(_CommandTable):
    """Control commands for Apache Kafka: every fault a real operation on a real broker."""

    def __init__(self, cluster: KraftCluster) -> None:
        super().__init__()
        self.cluster = cluster
        self._commands = {
            "ping": (0, lambda a: ""),
            "bootstrap": (0, lambda a: cluster.bootstrap),
            "sasl": (0, lambda a: self._sasl()),
            "pid": (1, lambda a: str(cluster.node(int(a[0])).pid)),
            "down": (1, lambda a: self._do(cluster.down, int(a[0]))),
            "up": (1, lambda a: self._do(cluster.up, int(a[0]))),
            "leader": (3, lambda a: self._do(cluster.move_leader, a[0], int(a[1]), int(a[2]))),
            "create-topic": (2, lambda a: self._create(a[0], a[1])),
            "create-topic-rf": (3, lambda a: self._create(a[0], a[1], a[2])),
            "add-broker": (0, lambda a: str(cluster.add_broker())),
            "rtt": (2, self._no_rtt),
        }

    @staticmethod
    def _do(fn: Callable[..., None], *args: object) -> str:
        fn(*args)
        return ""

    @staticmethod
    def _no_rtt(args: list[str]) -> str:
        raise ValueError(
            "rtt: Apache Kafka has no response delay to set; stall a broker with "
            "kill -STOP $(nines broker ctl ... pid ID), or use --engine mock"
        )

    def _sasl(self) -> str:
        sasl = self.cluster.sasl
        if sasl is None:
            raise ValueError("sasl: this cluster has no SASL_SSL listener (start it with --sasl)")
        return f"{self.cluster.sasl_bootstrap} {sasl.client_config}"

    def _create(self, name: str, partitions: str, rf: str | None = None) -> str:
        spec = f"{name}:{partitions}" + (f":{rf}" if rf is not None else "")
        try:
            topic, count, replication = parse_topic_rf(spec)
        except ValueError as exc:
            raise ValueError(f"create-topic {spec}: {exc}") from None
        self.cluster.create_topic(topic, count, replication)
        return ""


class _ControlHandler(socketserver.StreamRequestHandler):
    def handle(self) -> None:
        controller: Controller = self.server.controller  # type: ignore[attr-defined]
        for raw in self.rfile:
            reply = controller.handle(raw.decode("utf-8", "replace").strip())
            self.wfile.write(reply.encode() + b"\n")
            self.wfile.flush()


class _ControlServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


#: Above this many brokers a topic gets one replica per partition, which the mock itself places
#: as partition p on broker (p mod N) + 1: a set_leader call can wait most of a second, so
#: placing 1,000 partitions by hand took minutes (docs/benchmarks.md, the fleet's cost).
REPLICATED_UP_TO_BROKERS = 64


def create_topic(cluster: MockCluster, name: str, partitions: int) -> None:
    """Create a topic and spread its leaders: partition p led by broker (p mod N) + 1."""
    if cluster.brokers > REPLICATED_UP_TO_BROKERS:
        cluster.create_topic(name, partitions, replication_factor=1)
        return
    cluster.create_topic(name, partitions, replication_factor=min(3, cluster.brokers))
    for p in range(partitions):
        cluster.set_leader(name, p, p % cluster.brokers + 1)


def _start_control(controller: _CommandTable) -> _ControlServer:
    control = _ControlServer((LOOPBACK, 0), _ControlHandler)
    control.controller = controller  # type: ignore[attr-defined]
    threading.Thread(
        target=control.serve_forever, args=(0.05,), name="control", daemon=True
    ).start()
    return control


def _announce(bootstrap: str, control: _ControlServer, ready_file: Path | None, what: str) -> None:
    """Ready: the ready file (pid: this process, whose group holds every broker), the
    bootstrap on stdout, one line on stderr saying ``what`` runs and where to control it."""
    ctl_addr = control.server_address
    info = ReadyInfo(bootstrap, (str(ctl_addr[0]), int(ctl_addr[1])), os.getpid())
    if ready_file is not None:
        write_ready(ready_file, info)
    print(bootstrap, flush=True)
    print(
        f"nines broker: {what}, control {info.control[0]}:{info.control[1]}",
        file=sys.stderr,
        flush=True,
    )


def _close(control: _ControlServer | None, ready_file: Path | None) -> None:
    """The control socket closed and the ready file gone: nobody reaches a stopping cluster."""
    if control is not None:
        control.shutdown()
        control.server_close()
    if ready_file is not None:
        with contextlib.suppress(OSError):
            ready_file.unlink()


def serve_tansu(
    cfg: BrokerConfig,
    ready_file: Path | None,
    wait: Callable[[Callable[[], bool]], bool],
    binary: Path,
) -> int:
    """Run Tansu as a child until ``wait(alive)`` returns; 1 if Tansu itself died."""
    broker = TansuBroker(binary, port=cfg.port)  # its log goes to our stderr
    control: _ControlServer | None = None
    try:
        broker.start()
        topics = dict(cfg.topic_specs())
        for name, partitions in topics.items():
            broker.create_topic(name, partitions)
        control = _start_control(TansuController(broker, topics))
        _announce(broker.bootstrap, control, ready_file, f"tansu ({binary}) pid {broker.pid}")
        if not wait(lambda: broker.poll() is None):
            print(f"nines broker: tansu exited with {broker.poll()}", file=sys.stderr, flush=True)
            return 1
    finally:
        _close(control, ready_file)
        broker.stop()
    return 0


def serve_kafka(
    cfg: BrokerConfig, ready_file: Path | None, wait: Callable[[Callable[[], bool]], bool]
) -> int:
    """Run an Apache Kafka cluster until ``wait(alive)`` returns; 1 if a broker died unasked."""
    from testbroker.kafka_jars import kafka_version, resolve

    classpath = resolve()
    home = Path(tempfile.mkdtemp(prefix="nines-kafka-"))
    cluster = KraftCluster(classpath, cfg.brokers, home, sasl=cfg.sasl, port=cfg.port)
    control: _ControlServer | None = None
    try:
        cluster.start(warm_up=cfg.warm_up)
        for name, partitions, rf in cfg.topic_specs_rf():
            cluster.create_topic(name, partitions, rf)
        control = _start_control(KafkaController(cluster))
        what = f"Apache Kafka {kafka_version()}, {cfg.brokers} broker(s) (logs under {home})"
        _announce(cluster.bootstrap, control, ready_file, what)
        if not wait(cluster.alive):
            print(f"nines broker: broker(s) {cluster.dead()} exited", file=sys.stderr, flush=True)
            return 1
    finally:
        _close(control, ready_file)
        cluster.stop()
        shutil.rmtree(home, ignore_errors=True)
    return 0


def serve(cfg: BrokerConfig, ready_file: Path | None, wait: Callable[[], object]) -> int:
    """Run the cluster until ``wait()`` returns; print the bootstrap string once ready."""
    cluster = MockCluster(cfg.brokers)
    forwarders: list[Forwarder] = []
    control: _ControlServer | None = None
    try:
        topics = dict(cfg.topic_specs())
        for name, partitions in topics.items():
            create_topic(cluster, name, partitions)
        bootstrap = cluster.bootstraps
        if cfg.port is not None:
            real = bootstrap.split(",")
            for i, addr in enumerate(real):
                host, _, port = addr.rpartition(":")
                fwd = Forwarder(cfg.port + i, (host, int(port)))
                forwarders.append(fwd)
                cluster.set_advertised(i + 1, LOOPBACK, fwd.port)
            bootstrap = ",".join(f"{LOOPBACK}:{f.port}" for f in forwarders)
        cluster.set_controller(1)
        control = _start_control(Controller(cluster, bootstrap, topics, cfg.port is not None))
        _announce(bootstrap, control, ready_file, f"{cfg.brokers} broker(s)")
        wait()
    finally:
        _close(control, ready_file)
        for fwd in forwarders:
            fwd.close()
        cluster.destroy()
    return 0


def run_until_signalled(
    cfg: BrokerConfig, ready_file: Path | None, tansu_binary: Path | None = None
) -> int:
    """Serve until SIGTERM or SIGINT, then shut down cleanly and return 0."""
    # Blocked before our threads start, so they inherit the mask and the main thread takes the
    # signal in sigtimedwait. Not every thread: one native thread started during the imports
    # blocks nothing, and a signal that comes after the mask but before the main thread waits
    # goes to it; Python's handler then only runs when the main thread next runs Python code,
    # which a blocking sigwait entered just then would never do: every wait here times out each
    # 0.2 s. And a signal of the start-up whose SystemExit was swallowed on its way up (seen:
    # the handler ran, and `nines broker` started anyway, 1 run in 5-6 of
    # test_broker_signals.py on a quiet machine) is still a stop: quiet_stop remembers it.
    signals = {signal.SIGTERM, signal.SIGINT}
    signal.pthread_sigmask(signal.SIG_BLOCK, signals)

    def signalled(timeout_s: float) -> bool:
        # sigtimedwait returns an empty siginfo (si_signo 0), not None, when a stop (Ctrl+Z,
        # SIGSTOP) outlasted its timeout: only a signal we wait for counts.
        got = signal.sigtimedwait(signals, timeout_s)
        return got is not None and got.si_signo in signals

    def until_signal_or_death(alive: Callable[[], bool]) -> bool:
        """True on SIGTERM/SIGINT; False if a child died unasked. Ctrl+C reaches the whole
        group at once, so a child that ended with our own signal on its way is no death."""
        while alive() and not quiet_stop.requested():
            if signalled(0.2):
                return True
        return quiet_stop.requested() or signalled(1.0)

    try:
        if cfg.engine == "tansu":
            assert tansu_binary is not None
            return serve_tansu(cfg, ready_file, until_signal_or_death, tansu_binary)
        if cfg.engine == "kafka":
            return serve_kafka(cfg, ready_file, until_signal_or_death)
        return serve(cfg, ready_file, lambda: until_signal_or_death(lambda: True))
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, signals)
