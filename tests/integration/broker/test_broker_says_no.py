"""The test brokers say no, and ``nines broker`` refuses what it cannot run before it starts.

``ctl leader`` on a mistyped topic exits 1 naming it and creates nothing, on the mock and on
Apache Kafka, whose brokers run with ``auto.create.topics.enable=false`` (a client asking for a
topic's metadata no longer makes it). A replication factor above the brokers and a busy
``--port`` are one line, exit 2, before any broker, JVM or child starts; a SIGTERM while Kafka
starts ends it at once; ``ctl --timeout`` must be a duration above 0. Every run is the real CLI.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka_cluster import producer, unique_topic

from monitor.cli import main
from testbroker import EmbeddedBroker

#: Seconds a refusal may take: a Python start and the imports, on a loaded 2-core machine.
REFUSAL_BOUND_S = 20.0


def nines(*args: str, timeout_s: float = 60) -> tuple[subprocess.CompletedProcess[str], float]:
    started = time.monotonic()
    out = subprocess.run(
        [sys.executable, "-m", "monitor", *args],
        capture_output=True, text=True, timeout=timeout_s, check=False,
    )  # fmt: skip
    return out, time.monotonic() - started


def one_line(out: subprocess.CompletedProcess[str]) -> str:
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in out.stderr, out.stderr[-3000:]
    return lines[0]


def topics_of(bootstrap: str) -> set[str]:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    return set(admin.list_topics(timeout=30).topics)  # every topic: never creates one


@pytest.fixture(params=["mock", "kafka"])
def engine_broker(request: pytest.FixtureRequest) -> EmbeddedBroker:
    """A mock cluster of its own, and the session's Apache Kafka."""
    name = "fresh_broker" if request.param == "mock" else "kafka_broker"
    cluster: EmbeddedBroker = request.getfixturevalue(name)
    return cluster


def test_ctl_leader_on_a_mistyped_topic_exits_1_naming_it(engine_broker: EmbeddedBroker) -> None:
    topic = unique_topic(engine_broker, 2)
    typo = topic + "x"
    out, took_s = nines("broker", "ctl", "--ready-file", str(engine_broker.ready_file),
                        "leader", typo, "0", "1")  # fmt: skip
    assert out.returncode == 1, (out.stdout, out.stderr)
    assert out.stdout == ""
    line = one_line(out)
    assert line.startswith("nines broker ctl: error:") and f"unknown topic '{typo}'" in line
    assert typo not in topics_of(engine_broker.bootstrap)
    assert took_s < REFUSAL_BOUND_S
    if engine_broker.engine == "mock":  # the topic it meant moves as asked (on Kafka: a JVM tool)
        out, _ = nines("broker", "ctl", "--ready-file", str(engine_broker.ready_file),
                       "leader", topic, "1", "1")  # fmt: skip
        assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_apache_kafka_creates_no_topic_a_client_asks_for(kafka_broker: EmbeddedBroker) -> None:
    """A producer's metadata request allows auto-creation (librdkafka's default for producers);
    the brokers refuse it, and a produce to the typo fails instead of making a topic."""
    typo = f"nines.typo-{os.getpid()}-{time.monotonic_ns()}"
    # librdkafka fails a produce to a missing topic once topic.metadata.propagation.max.ms has
    # passed (30 s by default: 28 s of this test's 30 were that wait)
    prod = producer(
        kafka_broker.bootstrap,
        **{"allow.auto.create.topics": True, "topic.metadata.propagation.max.ms": 1000},
    )
    md = prod.list_topics(typo, timeout=30)
    assert md.topics[typo].error is not None and md.topics[typo].error.name() in (
        "UNKNOWN_TOPIC_OR_PART",
        "UNKNOWN_TOPIC_ID",
    ), md.topics[typo].error
    failures: list[str] = []
    prod.produce(typo, b"x", on_delivery=lambda err, _msg: failures.append(str(err)))
    prod.flush(30)
    assert len(failures) == 1 and "UNKNOWN_TOPIC" in failures[0], failures
    assert typo not in topics_of(kafka_broker.bootstrap)


def test_a_replication_factor_above_the_brokers_is_refused_before_any_jvm() -> None:
    out, took_s = nines("broker", "--engine", "kafka", "--brokers", "1", "--topic", "orders:1:3")
    assert out.returncode == 2, out.stderr
    line = one_line(out)
    assert line.startswith("nines broker: error: broker.topics:"), line
    assert "orders" in line and "replication factor 3" in line and "1 broker" in line
    assert out.stdout == ""  # no bootstrap: nothing started
    assert took_s < REFUSAL_BOUND_S  # a Kafka start takes 15 s and more


@pytest.fixture
def busy_port() -> Iterator[int]:
    """A loopback port that a listening socket holds."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield s.getsockname()[1]


@pytest.mark.parametrize(
    ("engine", "offset"),
    [("mock", 0), ("mock", 1), ("kafka", 0), ("kafka", 1), ("tansu", 0)],
)
def test_a_busy_port_is_one_line_before_anything_starts(
    engine: str, offset: int, busy_port: int
) -> None:
    """Broker 2's port (``--port`` + 1) counts too; tansu is one broker on ``--port``."""
    out, took_s = nines("broker", "--engine", engine, "--port", str(busy_port - offset))
    assert out.returncode == 2, out.stderr
    line = one_line(out)
    assert line.startswith("nines broker: error: broker.port:"), line
    assert f"127.0.0.1:{busy_port}" in line and "Address already in use" in line
    assert took_s < REFUSAL_BOUND_S


def _children(pid: int) -> list[int]:
    """Children of every thread of ``pid`` (the JVMs are forked by a spawner thread)."""
    out = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []
    for tid in tasks:
        with contextlib.suppress(OSError):
            out += [int(c) for c in Path(f"/proc/{pid}/task/{tid}/children").read_text().split()]
    return out


def _descendants_running_java(pid: int) -> bool:
    todo, seen = [pid], set()
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        for child in _children(p):
            with contextlib.suppress(OSError):
                if Path(f"/proc/{child}/exe").resolve().name == "java":
                    return True
            todo.append(child)
    return False


def test_sigterm_while_kafka_starts_ends_it_at_once(require_kafka_jars: None) -> None:
    """The signals wait, blocked, for the cluster to be ready; a stop asked for meanwhile now
    ends every wait of the start (it waited up to 90 s each), stops the JVMs and exits 0."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "monitor", "broker", "--engine", "kafka", "--brokers", "1"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while not _descendants_running_java(proc.pid):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "no JVM started"
            time.sleep(0.05)
        time.sleep(1.0)  # the JVM is formatting its log dir or starting
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
        took_s = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 0, err[-3000:]
    assert out == "" and "Traceback" not in err, err[-3000:]
    assert took_s < 30, took_s  # a clean stop of the JVMs; the start would have taken longer


BAD_TIMEOUTS = ["-1", "nan", "0", "inf", "-inf", "1e400", "0s", "-5s", "2d", "soon", ""]


@pytest.mark.parametrize("value", ["-1", "nan", "0"])
def test_ctl_timeout_the_issue_values_are_one_line_exit_2(value: str) -> None:
    out, took_s = nines("broker", "ctl", "--ready-file", "/nonexistent", "--timeout", value, "ping")
    assert out.returncode == 2, out.stderr
    line = one_line(out)
    assert line.startswith("nines broker ctl: error: argument --timeout:"), line
    assert took_s < REFUSAL_BOUND_S


@settings(max_examples=60, deadline=None)
@given(
    st.one_of(
        st.sampled_from(BAD_TIMEOUTS),
        st.floats(max_value=0.0).map(repr),
        st.floats(min_value=86_400.001, allow_infinity=True).map(repr),
        st.text(alphabet="abcxyz-+*/!", min_size=1, max_size=6),
    )
)
def test_ctl_timeout_anything_not_in_0_to_1d_is_refused(value: str) -> None:
    """In process (the same entry point), a value per example; fd-level stderr captured."""
    import io

    err = io.StringIO()
    with contextlib.redirect_stderr(err), pytest.raises(SystemExit) as done:
        main(["broker", "ctl", "--ready-file", "/nonexistent", "--timeout", value, "ping"])
    assert done.value.code == 2
    lines = err.getvalue().strip().splitlines()
    assert len(lines) == 1 and "argument --timeout:" in lines[0], lines
