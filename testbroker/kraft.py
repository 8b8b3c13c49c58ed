"""Apache Kafka in KRaft mode, as the ``kafka`` engine of ``nines broker``: one JVM per broker.

Brokers 1..min(N, 3) run in combined mode (broker and controller, a static voter set); more
brokers, and any added later, are brokers only. Every broker listens on loopback with its own
log directory under the cluster's work dir and logs to ``broker-ID/broker.log`` through log4j2,
never to our screen. Faults are real operations: ``down`` is a clean shutdown of that JVM,
``up`` restarts it on the same log directory, ``leader`` is a reassignment plus a preferred
leader election, ``add-broker`` starts a broker that joins the cluster.

Every JVM is started from one long-lived thread (:class:`Spawner`): a child's parent-death
signal fires when the *thread* that forked it ends, and control commands run on short-lived
threads.
"""

from __future__ import annotations

import base64
import concurrent.futures
import contextlib
import json
import os
import queue
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from testbroker.children import child_setup
from testbroker.control import end_process
from testbroker.ports import LOOPBACK, free_port
from testbroker.tls import TlsError, make_tls

#: Brokers that are also KRaft voters: three tolerate one down, as production quorums do.
MAX_VOTERS = 3
#: Heap of each broker: three of them, a probe and Spark fit a 2-core, 24 GiB machine.
HEAP = "512m"
#: Kafka's own JVM performance options (bin/kafka-run-class.sh), G1 with 20 ms pause goals.
JVM_OPTS = (
    "-server",
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent",
    "-Djava.awt.headless=true",
)
#: A JVM on a loaded 2-core machine takes 5-15 s to listen; a clean shutdown a few seconds.
START_TIMEOUT_S = 90.0
#: The warm-up (``KraftCluster.warm_up``): messages a second through every broker, for at
#: least WARM_UP_S and at most WARM_UP_MAX_S seconds, until one second's acks have a p99 under
#: WARM_P99_S.
WARM_RATE = 1000
WARM_UP_S = 4.0
WARM_UP_MAX_S = 60.0
WARM_P99_S = 0.05


def warm_verdict(elapsed_s: float, p99_s: float, before_s: float) -> str | None:
    """The warm-up's rule, after each second of it: None to go on, else the verdict.

    Warm once ``WARM_UP_S`` have passed and the last second's ack p99 is under ``WARM_P99_S``,
    or is no better than the second's before (what is left is the machine's, not the JIT's; a
    second without acks, p99 infinite, never counts as that); ready anyway at ``WARM_UP_MAX_S``.
    """
    if elapsed_s >= WARM_UP_S:
        if p99_s < WARM_P99_S:
            return "warm"
        if before_s <= p99_s < float("inf"):
            return "warm (acks stopped improving)"
    return "not warm, ready anyway" if elapsed_s >= WARM_UP_MAX_S else None


STOP_TIMEOUT_S = 60.0
SCRAM_USER = "nines"
SCRAM_MECHANISM = "SCRAM-SHA-512"
#: KRaft's ACL authorizer (``authorizer=True``), and its one super user: the principal of the
#: PLAINTEXT and controller listeners, which only the brokers and the test harness use. Clients
#: under test come in on the SASL_SSL listener as SCRAM users of their own, with ACLs only.
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
SUPER_USER = "User:ANONYMOUS"

T = TypeVar("T")


class KafkaEngineError(RuntimeError):
    """A broker did not start, stop or answer; the message names the broker and its log."""


#: A stop asked for while the cluster starts (its signals are blocked and waited for only once
#: it is ready): each wait below ends at once, the cluster is stopped, and the signal is taken.
STOP_SIGNALS = frozenset({signal.SIGTERM, signal.SIGINT})


def stop_requested() -> bool:
    """True while a SIGTERM or SIGINT waits, blocked, for ``nines broker`` to take it."""
    return bool(signal.sigpending() & STOP_SIGNALS)


def _check_start(nodes: list[KafkaNode]) -> None:
    """Raise at once when the start cannot finish: a stop was asked for, or a JVM exited."""
    if stop_requested():
        raise KafkaEngineError("start interrupted by a stop signal")
    for node in nodes:
        if not node.down and not node.alive():
            code = None if node.proc is None else node.proc.returncode
            raise KafkaEngineError(
                f"broker {node.node_id} exited ({code}) while starting; see {node.log_path}"
            )


class Spawner:
    """One thread that starts every child, so their parent-death signal outlives callers."""

    def __init__(self) -> None:
        self._jobs: queue.Queue[tuple[Callable[[], Any], concurrent.futures.Future[Any]] | None]
        self._jobs = queue.Queue()
        self._thread = threading.Thread(target=self._run, name="spawner", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while (job := self._jobs.get()) is not None:
            fn, future = job
            try:
                future.set_result(fn())
            except BaseException as exc:  # handed to the caller, raised there
                future.set_exception(exc)

    def call(self, fn: Callable[[], T]) -> T:
        future: concurrent.futures.Future[T] = concurrent.futures.Future()
        self._jobs.put((fn, future))
        return future.result()

    def close(self) -> None:
        self._jobs.put(None)


def java() -> str:
    """The JVM to run: $JAVA_HOME's, else ``java`` on PATH (Java 17+)."""
    home = os.environ.get("JAVA_HOME", "").strip()
    if home and (Path(home) / "bin" / "java").is_file():
        return str(Path(home) / "bin" / "java")
    found = shutil.which("java")
    if found is None:
        raise KafkaEngineError("java not found: Apache Kafka needs Java 17 or later")
    return found


def cluster_id() -> str:
    """A KRaft cluster id: a random UUID, base64url without padding, as kafka-storage makes."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


@dataclass(frozen=True)
class Sasl:
    """The SASL_SSL listener's material: a CA the clients trust, a SCRAM user, its password."""

    ca: Path
    keystore: Path
    password_file: Path
    client_config: Path

    @property
    def password(self) -> str:
        return self.password_file.read_text().strip()


def make_sasl(directory: Path) -> Sasl:
    """A throwaway CA, a loopback server certificate (PEM) and a random SCRAM password.

    The password is written to a 0600 file and never printed; ``client.yaml`` names it as
    ``file:PATH`` for the probe's and the stream's ``kafka:`` sections."""
    try:
        tls = make_tls(directory, days=30)
    except TlsError as exc:
        raise KafkaEngineError(f"the SASL_SSL listener: {exc}") from None
    ca, key, cert = tls.ca, tls.key, tls.cert
    keystore = directory / "server.pem"  # Kafka's PEM keystore: the key, then the chain
    keystore.write_text(key.read_text() + cert.read_text())
    keystore.chmod(0o600)
    password_file = directory / "password"
    password_file.write_text(secrets.token_urlsafe(18) + "\n")
    password_file.chmod(0o600)
    settings = {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": SCRAM_MECHANISM,
        "sasl.username": SCRAM_USER,
        "sasl.password": f"file:{password_file}",
        "ssl.ca.location": str(ca),
    }
    client_config = directory / "client.yaml"
    lines = []
    for stage in ("probe", "stream"):
        lines.append(f"{stage}:\n  kafka:")
        lines += [f"    {k}: {json.dumps(v)}" for k, v in settings.items()]
    client_config.write_text("\n".join(lines) + "\n")
    return Sasl(ca, keystore, password_file, client_config)


#: The OAUTHBEARER listener's name (its protocol is SASL_SSL).
OAUTH_LISTENER = "OAUTH"


@dataclass(frozen=True)
class OAuthListener:
    """A SASL_SSL listener for SASL/OAUTHBEARER, besides the others: who validates the tokens.

    ``handler`` is the broker's server callback handler class (Kafka's
    ``OAuthBearerValidatorCallbackHandler`` for OIDC's JWTs, or a test's own), ``jaas`` the
    options of its login module, ``settings`` broker settings added as they are (the JWKS URL,
    the expected audience, ``connections.max.reauth.ms``...), ``classpath`` jars the handler
    needs and ``system_properties`` the JVM's (Kafka 4's allowed OAuth URLs)."""

    handler: str
    jaas: dict[str, str] = field(default_factory=dict)
    settings: dict[str, str] = field(default_factory=dict)
    classpath: tuple[str, ...] = ()
    system_properties: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class OAuthTls:
    """The OAUTHBEARER listener's TLS: a CA the clients trust, the broker's PEM keystore."""

    ca: Path
    keystore: Path


def make_oauth_tls(directory: Path) -> OAuthTls:
    """A throwaway CA and a loopback server certificate for the OAUTHBEARER listener."""
    try:
        tls = make_tls(directory, days=30)
    except TlsError as exc:
        raise KafkaEngineError(f"the OAUTHBEARER listener: {exc}") from None
    keystore = directory / "server.pem"
    keystore.write_text(tls.key.read_text() + tls.cert.read_text())
    keystore.chmod(0o600)
    return OAuthTls(tls.ca, keystore)


LOG4J2 = """\
status = error
appender.file.type = RollingFile
appender.file.name = file
appender.file.fileName = {log}
appender.file.filePattern = {log}.%i
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
appender.file.policies.type = Policies
appender.file.policies.size.type = SizeBasedTriggeringPolicy
appender.file.policies.size.size = 20MB
appender.file.strategy.type = DefaultRolloverStrategy
appender.file.strategy.max = 2
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = file
logger.state.name = state.change.logger
logger.state.level = WARN
"""
#: With the authorizer: its denials (INFO) in the broker's log, where a test reads them.
LOG4J2_AUTHORIZER = """\
logger.authorizer.name = kafka.authorizer.logger
logger.authorizer.level = INFO
"""


@dataclass
class Ports:
    """One broker's loopback ports: clients, its controller (voters only), SASL_SSL clients."""

    plain: int
    controller: int
    sasl: int | None
    oauth: int | None = None


class KafkaNode:
    """One Apache Kafka JVM: its config and log dir under ``home``; start, stop, restart."""

    def __init__(
        self,
        node_id: int,
        home: Path,
        ports: Ports,
        voter: bool,
        sasl: Sasl | None,
        oauth: tuple[OAuthListener, OAuthTls] | None = None,
        authorizer: bool = False,
    ) -> None:
        self.node_id = node_id
        self.home = home
        self.ports = ports
        self.voter = voter
        self.sasl = sasl
        self.oauth = oauth
        self.authorizer = authorizer
        self.log_path = home / "broker.log"
        self.proc: subprocess.Popen[bytes] | None = None
        #: Not running on purpose (not started yet, or ``ctl down``): its absence is no failure.
        self.down = True

    @property
    def bootstrap(self) -> str:
        return f"{LOOPBACK}:{self.ports.plain}"

    @property
    def sasl_bootstrap(self) -> str | None:
        return None if self.ports.sasl is None else f"{LOOPBACK}:{self.ports.sasl}"

    @property
    def oauth_bootstrap(self) -> str | None:
        return None if self.ports.oauth is None else f"{LOOPBACK}:{self.ports.oauth}"

    def properties(self, voters: str, replication: int) -> dict[str, str]:
        """server.properties: loopback listeners, small thread pools, test-friendly defaults."""
        listeners = [f"PLAINTEXT://{self.bootstrap}"]
        advertised = [f"PLAINTEXT://{self.bootstrap}"]
        protocols = ["PLAINTEXT:PLAINTEXT", "CONTROLLER:PLAINTEXT"]
        if self.voter:
            listeners.append(f"CONTROLLER://{LOOPBACK}:{self.ports.controller}")
        props = {
            "process.roles": "broker,controller" if self.voter else "broker",
            "node.id": str(self.node_id),
            "controller.quorum.voters": voters,
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "log.dirs": str(self.home / "data"),
            # internal topics as replicated as the cluster allows; few partitions, a fast start
            "offsets.topic.replication.factor": str(replication),
            "offsets.topic.num.partitions": "8",
            "transaction.state.log.replication.factor": str(replication),
            # idempotent producers (the probe's) need a producer id from here: 50 partitions
            # by default, created on first use, took seconds on 2 cores with 3 replicas
            "transaction.state.log.num.partitions": "4",
            "transaction.state.log.min.isr": "1",
            "share.coordinator.state.topic.replication.factor": str(replication),
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            # a test cluster says no: a mistyped topic in a client's metadata request, a
            # produce or ``ctl leader`` is an unknown topic, never a new one
            "auto.create.topics.enable": "false",
            # a 2-core machine: Kafka's defaults (3 network, 8 io threads) only contend
            "num.network.threads": "2",
            "num.io.threads": "2",
            "num.replica.fetchers": "1",
            "background.threads": "2",
        }
        if self.sasl is not None:
            listeners.append(f"SASL_SSL://{self.sasl_bootstrap}")
            advertised.append(f"SASL_SSL://{self.sasl_bootstrap}")
            protocols.append("SASL_SSL:SASL_SSL")
            jaas = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
            props |= {
                "sasl.enabled.mechanisms": SCRAM_MECHANISM,
                "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": jaas,
                "listener.name.sasl_ssl.ssl.keystore.type": "PEM",
                "listener.name.sasl_ssl.ssl.keystore.location": str(self.sasl.keystore),
            }
        if self.oauth is not None:
            listener, tls = self.oauth
            name = OAUTH_LISTENER.lower()
            listeners.append(f"{OAUTH_LISTENER}://{self.oauth_bootstrap}")
            advertised.append(f"{OAUTH_LISTENER}://{self.oauth_bootstrap}")
            protocols.append(f"{OAUTH_LISTENER}:SASL_SSL")
            options = "".join(f' {k}="{v}"' for k, v in listener.jaas.items())
            module = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
            jaas = f"{module} required{options};"
            props |= {
                f"listener.name.{name}.sasl.enabled.mechanisms": "OAUTHBEARER",
                f"listener.name.{name}.oauthbearer.sasl.jaas.config": jaas,
                f"listener.name.{name}.oauthbearer.sasl.server.callback.handler.class": (
                    listener.handler
                ),
                f"listener.name.{name}.ssl.keystore.type": "PEM",
                f"listener.name.{name}.ssl.keystore.location": str(tls.keystore),
                **listener.settings,
            }
        if self.authorizer:
            props |= {
                "authorizer.class.name": AUTHORIZER,
                "super.users": SUPER_USER,
                "allow.everyone.if.no.acl.found": "false",
            }
        props |= {
            "listeners": ",".join(listeners),
            "advertised.listeners": ",".join(advertised),
            "listener.security.protocol.map": ",".join(protocols),
        }
        return props

    def configure(self, voters: str, replication: int) -> Path:
        """Write server.properties and log4j2.properties; the former's path."""
        (self.home / "data").mkdir(parents=True, exist_ok=True)
        props = self.properties(voters, replication)
        path = self.home / "server.properties"
        path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        log4j = LOG4J2.format(log=self.log_path)
        if self.authorizer:
            log4j += LOG4J2_AUTHORIZER
        (self.home / "log4j2.properties").write_text(log4j)
        return path

    def _jvm(self, classpath: str, main: str, *args: str, heap: str = HEAP) -> list[str]:
        log4j = f"-Dlog4j2.configurationFile={self.home / 'log4j2.properties'}"
        extra: list[str] = []
        if self.oauth is not None:
            listener = self.oauth[0]
            classpath = os.pathsep.join([classpath, *listener.classpath])
            extra = [f"-D{k}={v}" for k, v in listener.system_properties.items()]
        return [java(), f"-Xmx{heap}", f"-Xms{heap}", *JVM_OPTS, *extra, log4j, "-cp", classpath,
                main, *args]  # fmt: skip

    def format(self, classpath: str, cluster: str, sasl_password: str | None) -> None:
        """kafka-storage format: the log dir joins cluster ``cluster`` (and the SCRAM user)."""
        # "--cluster-id=ID": a base64url id may start with "-", which would read as an option
        args = ["format", f"--cluster-id={cluster}", "-c", str(self.home / "server.properties")]
        if sasl_password is not None and self.voter:
            user = f"{SCRAM_MECHANISM}=[name={SCRAM_USER},password={sasl_password}]"
            args += ["--add-scram", user]
        argv = self._jvm(classpath, "kafka.tools.StorageTool", *args, heap="256m")
        done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
        if done.returncode != 0:
            lines = (done.stderr or done.stdout).strip().splitlines()
            why = lines[-1] if lines else f"exit {done.returncode}"
            raise KafkaEngineError(f"broker {self.node_id}: kafka-storage format failed: {why}")

    def start(self, classpath: str, spawner: Spawner) -> None:
        """Launch the JVM (through the spawner); :meth:`wait_listening` waits for it."""
        argv = self._jvm(classpath, "kafka.Kafka", str(self.home / "server.properties"))
        out = self.home / "stdout.log"

        def launch() -> subprocess.Popen[bytes]:
            with out.open("ab") as sink:
                return subprocess.Popen(
                    argv, stdin=subprocess.DEVNULL, stdout=sink, stderr=sink,
                    preexec_fn=child_setup,
                )  # fmt: skip

        self.proc = spawner.call(launch)
        self.down = False

    def wait_listening(self, timeout_s: float = START_TIMEOUT_S) -> None:
        """Until the client listener accepts; a JVM that exits first is an error naming its log."""
        deadline = time.monotonic() + timeout_s
        while True:
            if self.proc is None or self.proc.poll() is not None:
                code = None if self.proc is None else self.proc.returncode
                raise KafkaEngineError(
                    f"broker {self.node_id} exited ({code}) while starting; see {self.log_path}"
                )
            _check_start([])
            with (
                contextlib.suppress(OSError),
                socket.create_connection((LOOPBACK, self.ports.plain), timeout=0.5),
            ):
                return
            if time.monotonic() > deadline:
                raise KafkaEngineError(
                    f"broker {self.node_id} not listening after {timeout_s:.0f} s; "
                    f"see {self.log_path}"
                )
            time.sleep(0.1)

    @property
    def pid(self) -> int:
        if self.proc is None or self.proc.poll() is not None:
            raise ValueError(f"broker {self.node_id} is not running")
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> int | None:
        """SIGCONT, SIGTERM (a controlled shutdown: leadership moves first), SIGKILL if it hangs."""
        proc, self.proc = self.proc, None
        return None if proc is None else end_process(proc, timeout_s)


class KraftCluster:
    """N Apache Kafka brokers in one KRaft cluster on loopback, owned by this process."""

    def __init__(
        self,
        classpath: str,
        brokers: int,
        home: Path,
        sasl: bool = False,
        port: int | None = None,
        oauth: OAuthListener | None = None,
        authorizer: bool = False,
    ) -> None:
        if authorizer and not sasl:
            raise ValueError("the authorizer needs the SASL_SSL listener (sasl=True)")
        self.classpath = classpath
        self.home = home
        self.cluster_id = cluster_id()
        self.spawner = Spawner()
        self.sasl = make_sasl(home / "sasl") if sasl else None
        #: The OAUTHBEARER listener and its TLS (``oauth_ca`` is what clients trust).
        self.oauth = None if oauth is None else (oauth, make_oauth_tls(home / "oauth"))
        self.nodes: dict[int, KafkaNode] = {}
        voters = min(brokers, MAX_VOTERS)
        for node_id in range(1, brokers + 1):
            plain = port + node_id - 1 if port is not None else free_port()
            ports = Ports(plain, free_port(), free_port() if sasl else None)
            ports.oauth = free_port() if oauth else None
            self.nodes[node_id] = KafkaNode(
                node_id,
                home / f"broker-{node_id}",
                ports,
                node_id <= voters,
                self.sasl,
                self.oauth,
                authorizer=authorizer,
            )
        self.voters = ",".join(
            f"{n.node_id}@{LOOPBACK}:{n.ports.controller}" for n in self.nodes.values() if n.voter
        )
        self.replication = min(brokers, 3)
        self.authorizer = authorizer

    @property
    def bootstrap(self) -> str:
        return ",".join(n.bootstrap for n in self.nodes.values())

    @property
    def sasl_bootstrap(self) -> str:
        return ",".join(n.sasl_bootstrap or "" for n in self.nodes.values())

    @property
    def oauth_bootstrap(self) -> str:
        """The OAUTHBEARER (SASL_SSL) listeners of every broker."""
        return ",".join(n.oauth_bootstrap or "" for n in self.nodes.values())

    @property
    def oauth_ca(self) -> Path:
        """The CA the OAUTHBEARER listener's clients trust (``ssl.ca.location``)."""
        if self.oauth is None:
            raise ValueError("this cluster has no OAUTHBEARER listener")
        return self.oauth[1].ca

    def _admin(self) -> Any:
        from confluent_kafka.admin import AdminClient

        return AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 0})

    def start(self, warm_up: bool = True) -> KraftCluster:
        """Format every log dir, start every JVM, wait until all brokers are registered, warm
        them up (``warm_up``)."""
        password = self.sasl.password if self.sasl is not None else None
        for node in self.nodes.values():
            node.configure(self.voters, self.replication)
        with concurrent.futures.ThreadPoolExecutor(len(self.nodes)) as pool:
            list(pool.map(lambda n: n.format(self.classpath, self.cluster_id, password),
                          self.nodes.values()))  # fmt: skip
        for node in self.nodes.values():
            node.start(self.classpath, self.spawner)
        for node in self.nodes.values():
            node.wait_listening()
        self.wait_registered(set(self.nodes))
        if warm_up:
            self.warm_up()
        return self

    def warm_up(self) -> None:
        """Produce (acks=all) and fetch through every broker until one second's acks have a p99
        under ``WARM_P99_S``, or no better than the second before (what is left is the
        machine's, not the JIT's), after ``WARM_UP_S`` at least, ``WARM_UP_MAX_S`` at most; then
        delete the topic. A fresh JVM runs its first requests interpreted: on a loaded 2-core
        machine a probe's first seconds saw acks seconds late (then ~5 ms p50). Waiting for
        50 ms alone ran the whole 60 s beside another cluster (p99 100-120 ms to the end)."""
        from confluent_kafka import Consumer, Producer, TopicPartition

        topic = "nines.warm-up"
        n = len(self.nodes)
        print(
            f"nines broker: warming up Apache Kafka: {WARM_RATE:,} msgs/s through every broker "
            f"until one second's acks have p99 < {WARM_P99_S * 1e3:g} ms or stop improving (at "
            f"least {WARM_UP_S:g} s, at most {WARM_UP_MAX_S:g} s)",
            file=sys.stderr,
            flush=True,
        )
        self.create_topic(topic, n)
        conf = {"bootstrap.servers": self.bootstrap, "log_level": 0}
        # idempotent, as the echo producer is: its producer-id path is warmed too
        prod = Producer({**conf, "linger.ms": 0, "acks": "all", "enable.idempotence": True})
        cons = Consumer({**conf, "group.id": "nines-warm-up", "fetch.wait.max.ms": 10,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})  # fmt: skip
        cons.assign([TopicPartition(topic, p) for p in range(n)])
        acks_s: list[float] = []

        def acked(err: Any, msg: Any) -> None:
            acks_s.append(msg.latency() if err is None else float("inf"))

        t0 = time.monotonic()
        slice_at, sent, p99, before = t0, 0, float("inf"), float("inf")
        verdict = None
        while verdict is None:
            now = time.monotonic()
            for _ in range(int((now - t0) * WARM_RATE) - sent):
                prod.produce(topic, b"x" * 1024, partition=sent % n, on_delivery=acked)
                sent += 1
            prod.poll(0)
            cons.consume(1000, 0.001)
            if now - slice_at >= 1.0:
                slice_at = now
                before = p99
                p99 = sorted(acks_s)[int(0.99 * (len(acks_s) - 1))] if acks_s else float("inf")
                acks_s.clear()
                verdict = warm_verdict(now - t0, p99, before)
        prod.flush(30)
        cons.close()
        took = time.monotonic() - t0
        print(f"nines broker: {verdict} after {took:.1f} s (last second's ack p99 "
              f"{p99 * 1e3:.1f} ms)", file=sys.stderr, flush=True)  # fmt: skip
        # best effort: a topic left behind is harmless, a start that fails on it is not
        with contextlib.suppress(Exception):
            self._admin().delete_topics([topic], operation_timeout=30)[topic].result(60)

    def wait_registered(self, ids: set[int], timeout_s: float = START_TIMEOUT_S) -> None:
        """Until the cluster's metadata lists every broker in ``ids`` (unfenced)."""
        deadline = time.monotonic() + timeout_s
        admin = self._admin()
        seen: set[int] = set()
        while time.monotonic() < deadline:
            # a JVM that could not bind its port (another process answered for it) exits here
            _check_start([self.nodes[i] for i in ids if i in self.nodes])
            with contextlib.suppress(Exception):
                seen = {b.id for b in admin.describe_cluster(request_timeout=5).result(10).nodes}
                if ids <= seen:
                    return
            time.sleep(0.2)
        raise KafkaEngineError(f"brokers {sorted(ids - seen)} not registered after {timeout_s} s")

    def create_topic(self, name: str, partitions: int, replication: int | None = None) -> None:
        """CreateTopics with leaders spread by Kafka; waits until every partition has a leader."""
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import NewTopic

        rf = replication if replication is not None else self.replication
        if rf > len(self.live_ids()):
            raise ValueError(f"replication factor {rf} > {len(self.live_ids())} live brokers")
        admin = self._admin()
        futures = admin.create_topics([NewTopic(name, partitions, rf)], operation_timeout=30)
        try:
            futures[name].result(timeout=60)
        except KafkaException as exc:
            raise ValueError(f"create topic {name}: {exc.args[0].str()}") from None
        self.wait_leaders(name, lambda leaders: len(leaders) == partitions and -1 not in leaders)

    def leaders(self, topic: str) -> dict[int, int]:
        """Partition -> leader id of ``topic`` (-1 while it has none)."""
        md = self._admin().list_topics(topic, timeout=10)
        t = md.topics.get(topic)
        if t is None or t.error is not None:
            return {}
        return {p.id: p.leader for p in t.partitions.values()}

    def replicas(self, topic: str) -> dict[int, list[int]]:
        """Partition -> replica ids of ``topic``; ValueError naming a topic the cluster lacks."""
        md = self._admin().list_topics(topic, timeout=10)
        t = md.topics.get(topic)
        if t is None or t.error is not None or not t.partitions:
            raise ValueError(f"unknown topic {topic!r} (create it first with create-topic)")
        return {p.id: list(p.replicas) for p in t.partitions.values()}

    def wait_leaders(
        self, topic: str, ok: Callable[[list[int]], bool], timeout_s: float = 60.0
    ) -> dict[int, int]:
        deadline = time.monotonic() + timeout_s
        while True:
            leaders = {}
            with contextlib.suppress(Exception):
                leaders = self.leaders(topic)
            if leaders and ok([leaders[p] for p in sorted(leaders)]):
                return leaders
            _check_start([])
            if time.monotonic() > deadline:
                raise KafkaEngineError(f"{topic}: leaders {leaders} after {timeout_s} s")
            time.sleep(0.2)

    def live_ids(self) -> list[int]:
        return [i for i, n in self.nodes.items() if n.alive()]

    def node(self, node_id: int) -> KafkaNode:
        node = self.nodes.get(node_id)
        if node is None:
            raise ValueError(f"no broker {node_id} (brokers are {sorted(self.nodes)})")
        return node

    def down(self, node_id: int) -> None:
        """Stop broker ``node_id`` cleanly (controlled shutdown); its log dir stays."""
        node = self.node(node_id)
        if not node.alive():
            raise ValueError(f"broker {node_id} is already down")
        node.down = True
        node.stop()

    def up(self, node_id: int) -> None:
        """Restart broker ``node_id`` on its own log dir; return once it is registered again."""
        node = self.node(node_id)
        if node.alive():
            raise ValueError(f"broker {node_id} is already up")
        node.start(self.classpath, self.spawner)
        node.wait_listening()
        self.wait_registered({node_id})

    def add_broker(self) -> int:
        """A new broker (broker role only) formatted into this cluster; its id once registered."""
        node_id = max(self.nodes) + 1
        ports = Ports(free_port(), free_port(), free_port() if self.sasl else None)
        ports.oauth = free_port() if self.oauth else None
        node = KafkaNode(
            node_id,
            self.home / f"broker-{node_id}",
            ports,
            False,
            self.sasl,
            self.oauth,
            authorizer=self.authorizer,
        )
        node.configure(self.voters, self.replication)
        node.format(self.classpath, self.cluster_id, None)
        self.nodes[node_id] = node
        node.start(self.classpath, self.spawner)
        node.wait_listening()
        self.wait_registered({node_id})
        return node_id

    def move_leader(self, topic: str, partition: int, node_id: int) -> None:
        """Reassign so ``node_id`` is the preferred replica, then a preferred leader election."""
        from confluent_kafka import ElectionType, TopicPartition

        self.node(node_id)
        replicas = self.replicas(topic).get(partition)
        if replicas is None:
            raise ValueError(f"{topic} has no partition {partition}")
        if replicas[0] != node_id:
            rest = [r for r in replicas if r != node_id]
            target = [node_id, *rest][: len(replicas)]
            plan = {"version": 1, "partitions": [
                {"topic": topic, "partition": partition, "replicas": target}]}  # fmt: skip
            path = self.home / f"reassign-{topic}-{partition}.json"
            path.write_text(json.dumps(plan))
            self._tool("org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
                       "--execute", "--reassignment-json-file", str(path))  # fmt: skip
            deadline = time.monotonic() + 60
            while self.replicas(topic).get(partition) != target:
                if time.monotonic() > deadline:
                    raise KafkaEngineError(f"{topic}[{partition}] reassignment to {target} stuck")
                time.sleep(0.2)
        admin = self._admin()
        tp = TopicPartition(topic, partition)
        # an election "not needed" (already the leader) is success
        with contextlib.suppress(Exception):
            admin.elect_leaders(ElectionType.PREFERRED, [tp]).result(30)
        self.wait_leaders(topic, lambda leaders: leaders[partition] == node_id)

    def _tool(self, main: str, *args: str) -> None:
        node = next(iter(self.nodes.values()))
        argv = node._jvm(self.classpath, main, "--bootstrap-server", self.bootstrap, *args,
                         heap="256m")  # fmt: skip
        done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
        if done.returncode != 0:
            lines = (done.stderr or done.stdout).strip().splitlines()
            why = lines[-1] if lines else f"exit {done.returncode}"
            raise KafkaEngineError(f"{main.rsplit('.', 1)[-1]}: {why}")

    def alive(self) -> bool:
        """True while every broker not taken down on purpose runs."""
        return all(n.alive() or n.down for n in self.nodes.values())

    def dead(self) -> list[int]:
        return [i for i, n in self.nodes.items() if not n.alive() and not n.down]

    def stop(self) -> None:
        """Stop every broker at once (SIGTERM in parallel), then the spawner."""
        with concurrent.futures.ThreadPoolExecutor(max(1, len(self.nodes))) as pool:
            list(pool.map(lambda n: n.stop(20.0), self.nodes.values()))
        self.spawner.close()


__all__ = [
    "KafkaEngineError",
    "KafkaNode",
    "KraftCluster",
    "OAuthListener",
    "OAuthTls",
    "Sasl",
    "Spawner",
]
