"""Least privilege under a real authorizer: Apache Kafka with KRaft's StandardAuthorizer.

The probe (with and without ``--manage-topic``) and the stream job each run as a SCRAM user
of their own with exactly the ACLs of :mod:`kafkautil.acls` (the table docs/deploy.md shows)
and are refused nothing; then, one case per row, the same user without that one row: one
line names the missing right, and the part either exits 2 at start or goes on, the refusal
counted in a metric an alert watches. Never a traceback, never a crash.

One 2-broker cluster for the module (a start is ~30 s on 2 loaded cores); every test makes its
own principals (tests/acl_cluster.py), so their ACLs never mix.
"""

from __future__ import annotations

import contextlib
import re
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from acl_cluster import AclCluster, Principal, denials
from probe_runs import wait_archived

from core.echo import Echo, encode_record
from kafkautil.acls import Acl, probe_acls, stream_acls
from testbroker.kafka_jars import resolve
from testbroker.ports import free_port

ROOT = Path(__file__).resolve().parents[2]
TOPIC, ECHOES = "acl.probe", "acl.echoes"
#: What the probe needs without topic management: the rows a removal case drops one of.
PROBE = probe_acls(TOPIC, ECHOES)
#: The counter each probe row's refusal is counted in while the probe runs, and the error
#: label it carries (an alert watches each: monitor/alerts/rules.py).
COUNTED = {
    ("WRITE", TOPIC): ("nines_probe_send_errors_total", "TOPIC_AUTHORIZATION_FAILED"),
    ("READ", TOPIC): ("nines_probe_receive_errors_total", "TOPIC_AUTHORIZATION_FAILED"),
    ("WRITE", ECHOES): ("nines_probe_echo_dropped_total", None),
    ("DESCRIBE", "nines-probe-"): (
        "nines_probe_receive_errors_total",
        "GROUP_AUTHORIZATION_FAILED",
    ),
}


@pytest.fixture(scope="module")
def acl_kafka(require_kafka_jars: None) -> Iterator[AclCluster]:
    cluster = AclCluster(resolve(), brokers=2).start()
    try:
        # one partition on two brokers: one broker leads nothing, and a probe without the
        # right to add a partition must say so
        cluster.create_topic(TOPIC, 1)
        cluster.create_topic(ECHOES, 1)
        yield cluster
    finally:
        cluster.stop()


def nines(*args: str, timeout_s: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "monitor", *args], capture_output=True,
                          text=True, timeout=timeout_s, cwd=ROOT)  # fmt: skip


def probe_args(kafka: AclCluster, who: Principal, config: Path, *more: str) -> list[str]:
    return ["probe", "--bootstrap", kafka.sasl_bootstrap, "--config", str(config), "--probe-id",
            who.name, "--topic", TOPIC, "--echo-topic", ECHOES, "--rate", "20", *more]  # fmt: skip


def row_id(acl: Acl) -> str:
    return f"{acl.operation}-{acl.resource}-{acl.name}".lower()


def lacking(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "the principal lacks" in line]


def unled_broker(kafka: AclCluster, topic: str) -> int:
    (leader,) = kafka.cluster.leaders(topic).values()
    return next(b for b in kafka.cluster.nodes if b != leader)


def test_probe_and_stream_run_with_exactly_their_acls(
    acl_kafka: AclCluster, tmp_path: Path
) -> None:
    """No admin right: the probe probes a topic that exists, says which broker it cannot
    probe, and nothing it asks is refused; the stream job reads every echo it wrote."""
    probe = acl_kafka.user("probe")
    acl_kafka.grant(probe, PROBE)
    run = nines(*probe_args(acl_kafka, probe, probe.config, "--duration", "3s",
                            "--cluster", "acl", "--metrics-port", "0"))  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    idle = unled_broker(acl_kafka, TOPIC)
    assert f"brokers [{idle}] lead no partition of {TOPIC}, so they are not probed" in run.stderr
    assert "stopped: sent=60 received=60 lost=0 unresolved=0" in run.stderr, run.stderr[-2000:]
    assert "Traceback" not in run.stderr and denials(acl_kafka, probe) == []
    assert probe.password not in run.stdout + run.stderr

    stream = acl_kafka.user("stream")
    acl_kafka.grant(stream, stream_acls(ECHOES))
    # an echo two minutes on closes every window of the probe's echoes (within the stream's
    # max_clock_skew of its Kafka timestamp; written by the harness: the stream may only read)
    end_us = int(time.time() * 1e6) + 120_000_000
    from confluent_kafka import Producer

    prod = Producer({"bootstrap.servers": acl_kafka.bootstrap, "log_level": 0})
    prod.produce(ECHOES, value=encode_record(
        Echo("p", "pusher", "pusher", 0, 1, 0, 1, end_us, end_us, None, end_us + 1)))  # fmt: skip
    assert prod.flush(30) == 0
    archive, log = tmp_path / "archive", tmp_path / "stream.log"
    with log.open("wb") as err:
        job = subprocess.Popen(
            [sys.executable, "-m", "monitor", "stream", "--bootstrap", acl_kafka.sasl_bootstrap,
             "--config", str(stream.config), "--echo-topic", ECHOES, "--windows", "10s",
             "--watermark", "1s", "--trigger", "500ms", "--starting-offsets", "earliest",
             "--archive", str(archive), "--metrics-port", "0", "--master", "local[1]"],
            stdout=subprocess.DEVNULL, stderr=err, cwd=ROOT,
        )  # fmt: skip
    try:
        wait_archived(job, log, archive, "acl", 60, 240)
        job.send_signal(signal.SIGTERM)
        assert job.wait(60) == 0
    finally:
        if job.poll() is None:
            job.kill()
            job.wait(30)
    assert denials(acl_kafka, stream) == []


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        return str(r.read().decode())


def counted(text: str, metric: str, error: str | None) -> float:
    """The sum of ``metric``'s samples (those of ``error`` only, when given)."""
    from prometheus_client.parser import text_string_to_metric_families

    return sum(
        s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == metric and (error is None or s.labels.get("error") == error)
    )


@pytest.mark.parametrize("missing", PROBE, ids=row_id)
def test_a_probe_without_one_acl_counts_it_and_names_it_once(
    acl_kafka: AclCluster, missing: Acl
) -> None:
    who = acl_kafka.user("probe-less")
    acl_kafka.grant(who, [a for a in PROBE if a != missing])
    port = free_port()
    config = who.probe_config(shutdown_timeout="1s")
    argv = probe_args(acl_kafka, who, config, "--metrics-port", str(port))
    metric, error = COUNTED[(missing.operation, missing.name)]
    probe = subprocess.Popen([sys.executable, "-m", "monitor", *argv], stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True, cwd=ROOT)  # fmt: skip
    try:
        deadline, text = time.monotonic() + 60, ""
        while True:
            assert probe.poll() is None, probe.communicate()[1][-2000:]
            with contextlib.suppress(OSError):  # not serving yet
                text = scrape(port)
            if counted(text, metric, error) > 0:
                break
            assert time.monotonic() < deadline, f"{metric} {error} never counted:\n{text}"
            time.sleep(0.5)
        probe.send_signal(signal.SIGTERM)
        _, stderr = probe.communicate(timeout=60)
    finally:
        if probe.poll() is None:
            probe.kill()
            probe.communicate()
    assert probe.returncode == 0, stderr[-2000:]
    assert "Traceback" not in stderr
    name = f"nines-probe-{who.name}" if missing.resource == "GROUP" else missing.name
    right = f"the principal lacks {missing.operation} on {missing.resource.lower()} {name!r}"
    assert [right in line for line in lacking(stderr)] == [True], stderr[-2000:]
    rules = (ROOT / "helm" / "nines" / "files" / "rules.yaml").read_text()  # as rendered
    assert f"increase({metric}[" in rules, f"no alert watches {metric}"


def manage_case(
    acl_kafka: AclCluster, missing: str | None
) -> tuple[Principal, str, str, Acl | None]:
    who = acl_kafka.user("manager")
    topic, echo = f"acl.m.{who.name}", f"acl.me.{who.name}"
    table = probe_acls(topic, echo, manage=True)
    rows = {"probe-create": table[4], "echo-create": table[5], "alter": table[6]}
    dropped = rows.get(missing) if missing else None
    acl_kafka.grant(who, [a for a in table if a != dropped])
    return who, topic, echo, dropped


@pytest.mark.parametrize("missing", [None, "probe-create", "echo-create", "alter"])
def test_topic_management_with_its_acls_and_without_each(
    acl_kafka: AclCluster, missing: str | None
) -> None:
    who, topic, echo, dropped = manage_case(acl_kafka, missing)
    assert dropped is None or dropped.operation in ("CREATE", "ALTER")
    if missing == "alter":  # a topic that exists, one broker leading nothing: add a partition
        acl_kafka.create_topic(topic, 1)
    config = who.probe_config(manage_interval="1s", shutdown_timeout="1s")
    run = nines("probe", "--bootstrap", acl_kafka.sasl_bootstrap, "--config", str(config),
                "--probe-id", who.name, "--topic", topic, "--echo-topic", echo, "--rate", "20",
                "--duration", "4s", "--manage-topic", "--metrics-port", "0")  # fmt: skip
    assert "Traceback" not in run.stderr
    lines = lacking(run.stderr)
    if dropped is None:
        assert run.returncode == 0 and lines == [], run.stderr[-2000:]
        assert f"created {topic}" in run.stderr and f"created {echo}" in run.stderr
        assert denials(acl_kafka, who) == []
        return
    right = f"the principal lacks {dropped.operation} on topic {dropped.name!r}"
    assert len(lines) == 1 and right in lines[0], run.stderr[-2000:]
    if missing == "probe-create":  # nothing to probe: exit 2, one line
        assert run.returncode == 2 and run.stderr.strip().splitlines() == lines
        assert lines[0].startswith(f"nines probe: error: topic: {topic!r} is missing")
    elif missing == "echo-create":
        assert run.returncode == 0 and "the probe goes on" in lines[0]
    else:  # refused, counted (nines_probe_admin_errors_total), the unprobed broker named
        assert run.returncode == 0
        assert f"brokers [{unled_broker(acl_kafka, topic)}] stay unprobed" in lines[0]


@pytest.mark.parametrize("missing", stream_acls(ECHOES), ids=row_id)
def test_a_stream_without_one_acl_exits_2_naming_it(acl_kafka: AclCluster, missing: Acl) -> None:
    who = acl_kafka.user("stream-less")
    acl_kafka.grant(who, [a for a in stream_acls(ECHOES) if a != missing])
    run = nines("stream", "--bootstrap", acl_kafka.sasl_bootstrap, "--config", str(who.config),
                "--echo-topic", ECHOES, "--metrics-port", "0")  # fmt: skip
    lines = run.stderr.strip().splitlines()
    assert run.returncode == 2 and len(lines) == 1, run.stderr[-2000:]
    name = "nines-stream-preflight" if missing.resource == "GROUP" else missing.name
    right = f"the principal lacks {missing.operation} on {missing.resource.lower()} {name!r}"
    assert lines[0].startswith("nines stream: error: ") and right in lines[0], lines[0]
    assert who.password not in run.stdout + run.stderr


@pytest.mark.parametrize("with_group_read", [True, False], ids=["fleet-acls", "no-group-read"])
def test_a_fleet_replica_runs_with_exactly_its_acls(
    acl_kafka: AclCluster, with_group_read: bool
) -> None:
    """A fleet replica (``--fleet-group``) needs the probe's rows and Read on its group; with
    them it probes and nothing it asks is refused; without that one it never crashes, and the
    refusal names the group."""
    who = acl_kafka.user("fleet" if with_group_read else "fleetless")
    table = probe_acls(TOPIC, ECHOES, fleet=True)
    acl_kafka.grant(who, table if with_group_read else PROBE)
    # the drain ends at the last echo: 60 s only bounds it (10 s left 11 echoes out at load 17)
    config = who.probe_config(shutdown_timeout="60s")
    run = nines(*probe_args(acl_kafka, who, config, "--duration", "6s", "--fleet-group",
                            who.name, "--metrics-port", "0"))  # fmt: skip
    assert "Traceback" not in run.stderr and who.password not in run.stdout + run.stderr
    assert run.returncode == 0, run.stderr[-2000:]
    if with_group_read:
        assert denials(acl_kafka, who) == [], denials(acl_kafka, who)[:3]
        assert re.search(r"stopped: sent=(\d+) received=\1 lost=0", run.stderr), run.stderr[-2000:]
    else:  # the group refuses the replica: it probes nothing, and says why
        assert "stopped: sent=0 " in run.stderr, run.stderr[-2000:]
        (row,) = [a for a in table if a not in PROBE]
        right = f"the principal lacks READ on group 'nines-probe-fleet-{who.name}'"
        assert row.operation == "READ" and [right in line for line in lacking(run.stderr)] == [
            True
        ], run.stderr[-2000:]
