"""Pure parts of the probe: schedule, payload, tracker, config limits."""

from __future__ import annotations

import pytest

from core.config import ConfigError, build
from probes.config import MAX_SIZE_BYTES, ProbeConfig
from probes.payload import decode, encode, probe_hash
from probes.schedule import Schedule
from probes.tracker import Tracker

T0 = 1_795_000_000_000_000


def test_schedule_is_open_loop_and_keeps_intended_times() -> None:
    s = Schedule([0, 1], rate_per_s=100, t0_us=T0)
    sent = []
    for _ in range(6):
        t, p, seq = s.next_due()
        sent.append((t, p, seq))
        s.advance(p)
    # 100/s per partition = one every 10 ms, partitions staggered by 5 ms
    assert [x[0] - T0 for x in sent] == [0, 5_000, 10_000, 15_000, 20_000, 25_000]
    assert [x[1] for x in sent] == [0, 1, 0, 1, 0, 1]
    # falling behind does not re-time: the backlog's intended times are the schedule's
    assert s.intended_us(0, 1000) == T0 + 10_000_000


def test_payload_roundtrip_and_size() -> None:
    h = probe_hash("p1")
    raw = encode(h, 2, 77, T0, 512)
    assert len(raw) == 512
    msg = decode(raw)
    assert msg is not None and (msg.probe, msg.partition, msg.seq, msg.intended_us) == (
        h,
        2,
        77,
        T0,
    )
    assert decode(b"not a probe message at all, not even close to a header") is None
    assert encode(h, 0, 0, T0, 512)[64:] != raw[64:]  # random padding: compression cannot cheat


def test_tracker_one_echo_per_message_and_honest_counts() -> None:
    t = Tracker("p", "c", "t", 512, loss_timeout_us=1_000_000)
    for seq in range(5):
        t.sent(0, seq, T0 + seq * 1000, T0 + seq * 1000 + 5, leader=1)
    assert t.acked(0, 0, T0 + 300) is None  # not back yet
    e0 = t.received(0, 0, T0 + 800)
    assert e0 is not None and e0.end_to_end_us == 800 and e0.publish_us == 300
    assert t.received(0, 0, T0 + 900) is None  # duplicate
    t.acked(0, 2, T0 + 2_400)
    t.acked(0, 3, T0 + 3_400)
    assert t.received(0, 3, T0 + 5000) is not None
    assert t.received(0, 2, T0 + 5100) is not None  # out of order
    lost = t.expire(T0 + 1_002_000)
    assert [(e.seq, e.lost, e.timeout_us, e.end_to_end_us) for e in lost] == [
        (1, True, 1_000_000, 1_000_000)
    ]
    assert t.received(0, 1, T0 + 2_000_000) is None  # late after loss: no second echo
    s = t.stats[0]
    assert (s.sent, s.received, s.lost, s.duplicates, s.out_of_order, s.late_after_loss) == (
        5,
        3,
        1,
        1,
        1,
        1,
    )
    assert set(t.in_flight) == {(0, 4)}


def test_tracker_echo_waits_for_the_delivery_report() -> None:
    """Consumed back before its ack was reported, a message's echo still carries the ack."""
    t = Tracker("p", "c", "t", 512, loss_timeout_us=1_000_000)
    for seq in range(4):
        t.sent(0, seq, T0 + seq * 1000, T0 + seq * 1000 + 5, leader=1)
    assert t.received(0, 0, T0 + 700) is None  # held: no ack yet
    assert (t.held, t.unreceived, len(t.in_flight)) == (1, 3, 4)
    assert t.received(0, 0, T0 + 750) is None and t.stats[0].duplicates == 1  # held, repeated
    e0 = t.acked(0, 0, T0 + 900)  # the ack after the receipt
    assert e0 is not None and (e0.acked_us, e0.received_us) == (T0 + 900, T0 + 700)
    assert t.acked(0, 0, T0 + 950) is None  # one echo only
    assert t.send_failed(0, 1, "_MSG_TIMED_OUT") is None  # failed, not back (yet)
    e1 = t.received(0, 1, T0 + 1_800)  # came back anyway: no ack to wait for
    assert e1 is not None and e1.acked_us is None and not e1.lost
    assert t.received(0, 2, T0 + 2_600) is None  # its report never comes...
    late = t.expire(T0 + 2_000 + 1_000_000)  # ...so its echo goes out at the loss deadline
    assert [(e.seq, e.lost, e.received_us, e.acked_us) for e in late] == [
        (2, False, T0 + 2_600, None)
    ]
    assert t.received(0, 3, T0 + 3_700) is None
    held = t.release_held()  # shutdown: what still waits for a report goes out as it is
    assert [(e.seq, e.received_us, e.acked_us) for e in held] == [(3, T0 + 3_700, None)]
    assert (t.held, len(t.in_flight)) == (0, 0)
    assert t.stats[0].send_errors == {"_MSG_TIMED_OUT": 1} and t.stats[0].received == 4


def _lose(t: Tracker, partition: int, seqs: range, spacing_us: int) -> None:
    for seq in seqs:
        t.sent(partition, seq, T0 + seq * spacing_us, T0 + seq * spacing_us, leader=1)


def test_tracker_late_arrival_after_200k_losses_is_late_not_duplicate() -> None:
    # 250,000 messages lost in one outage at the 20,000 msgs/s limit, 30 s loss timeout
    timeout_us, spacing_us, n = 30_000_000, 50, 250_000
    t = Tracker("p", "c", "t", 512, loss_timeout_us=timeout_us)
    _lose(t, 0, range(n), spacing_us)
    now = T0 + n * spacing_us + timeout_us
    assert len(t.expire(now)) == n and t.stats[0].lost == n
    assert len(t.lost_runs[0]) == 1  # an outage is one run, however long
    # the oldest and a middle one arrive late, within the documented window
    assert t.received(0, 0, now + 1) is None
    assert t.received(0, n // 2, now + 2) is None
    s = t.stats[0]
    assert (s.late_after_loss, s.duplicates, s.received) == (2, 0, 0)
    assert t.received(0, n // 2, now + 3) is None  # its second arrival is a duplicate
    assert (s.late_after_loss, s.duplicates) == (2, 1)
    runs = t.lost_runs[0]
    assert list(zip(runs.starts, runs.ends, strict=True)) == [
        (1, n // 2),
        (n // 2 + 1, n),
    ]


def test_tracker_interleaved_losses_and_the_memory_horizon() -> None:
    timeout_us, spacing_us, n = 1_000_000, 100, 20_000
    t = Tracker("p", "c", "t", 512, loss_timeout_us=timeout_us)
    for seq in range(n):  # every other message comes back in time
        intended = T0 + seq * spacing_us
        t.sent(0, seq, intended, intended, leader=1)
        if seq % 2 == 0:
            t.acked(0, seq, intended + 10)
            assert t.received(0, seq, intended + 20) is not None
    now = T0 + n * spacing_us + timeout_us
    assert len(t.expire(now)) == n // 2
    runs = t.lost_runs[0]
    assert len(runs) == n // 2  # the worst case: one run per lost message
    assert t.received(0, 1, now) is None and t.received(0, 2, now) is None
    assert t.received(0, n - 1, now) is None and t.received(0, n - 2, now) is None
    s = t.stats[0]
    assert (s.late_after_loss, s.duplicates) == (2, 2)  # lost 1, n-1; received 2, n-2
    # Past the horizon the runs are forgotten (memory back to nothing)...
    later = T0 + n * spacing_us + 4 * timeout_us + 1
    t.expire(later)
    assert len(runs) == 0 and runs.forgotten_below == n - 2  # (n - 1 arrived late: taken)
    # ...and an arrival older than anything remembered counts as late, never as a duplicate
    assert t.received(0, 3, later) is None
    assert (s.late_after_loss, s.duplicates) == (3, 2)
    # newer than the horizon, it is still classified exactly
    t.sent(0, n, later, later, leader=1)
    t.acked(0, n, later + 1)
    assert t.received(0, n, later + 2) is not None
    assert t.received(0, n, later + 3) is None and s.duplicates == 3


@pytest.mark.parametrize(
    ("values", "field"),
    [
        ({"rate": 0}, "probe.rate"),
        ({"rate": -5}, "probe.rate"),
        ({"size": MAX_SIZE_BYTES + 1}, "probe.size"),
        ({"size": "2MiB"}, "probe.size"),
        ({"loss_timeout": "soon"}, "probe.loss_timeout"),
        ({"unknown": 1}, "probe.unknown"),
    ],
)
def test_bad_config_names_the_field(values: dict, field: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(ConfigError) as err:
        build(ProbeConfig, {"bootstrap": "x:9092", **values}, prefix="probe")
    assert str(err.value).startswith(field)


def test_secrets_resolve_from_env_and_files(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("SASL_PW", "s3cret")
    f = tmp_path / "user"
    f.write_text("alice\n")
    cfg = ProbeConfig(
        bootstrap="x:1",
        kafka={"sasl.password": "env:SASL_PW", "sasl.username": f"file:{f}", "acks": "all"},
    )
    assert cfg.client_settings() == {
        "sasl.password": "s3cret",
        "sasl.username": "alice",
        "acks": "all",
    }
    assert cfg.echo_bootstrap == "x:1"


def test_unresolvable_secret_is_a_config_error_naming_the_key(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.delenv("NINES_TEST_UNSET", raising=False)
    missing = tmp_path / "nope"
    cases = [
        ("env:NINES_TEST_UNSET", "environment variable NINES_TEST_UNSET is not set"),
        (f"file:{missing}", f"cannot read file {missing}: No such file or directory"),
        (f"file:{tmp_path}", f"cannot read file {tmp_path}: Is a directory"),
    ]
    for value, message in cases:
        cfg = ProbeConfig(bootstrap="x:1", kafka={"acks": "all", "sasl.password": value})
        with pytest.raises(ConfigError) as err:
            cfg.client_settings()
        assert str(err.value) == f"kafka.sasl.password: {message}"


def test_set_but_empty_env_secret_is_used_as_is(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("NINES_TEST_EMPTY", "")
    cfg = ProbeConfig(bootstrap="x:1", kafka={"sasl.password": "env:NINES_TEST_EMPTY"})
    assert cfg.client_settings() == {"sasl.password": ""}


def test_probe_cli_bad_secret_exits_2_without_connecting_or_leaking(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import os
    import subprocess
    import sys

    secret = tmp_path / "user"
    secret.write_text("alice-the-secret-user\n")
    cfg = tmp_path / "nines.yaml"
    for password, message in [
        (f"file:{tmp_path / 'pw'}", f"cannot read file {tmp_path / 'pw'}: No such file"),
        ("env:NINES_TEST_UNSET", "environment variable NINES_TEST_UNSET is not set"),
    ]:
        cfg.write_text(
            "probe:\n  bootstrap: 127.0.0.1:1\n  metrics_port: 0\n  kafka:\n"
            f"    sasl.username: file:{secret}\n    sasl.password: {password}\n"
        )
        env = {k: v for k, v in os.environ.items() if k != "NINES_TEST_UNSET"}
        out = subprocess.run(
            [sys.executable, "-m", "monitor", "probe", "--config", str(cfg)],
            capture_output=True, text=True, timeout=60, env=env,
        )  # fmt: skip
        assert out.returncode == 2, out.stderr
        assert out.stderr.splitlines() == [out.stderr.strip()], out.stderr
        assert out.stderr.startswith(f"nines probe: error: kafka.sasl.password: {message}")
        assert "Traceback" not in out.stderr and "alice" not in out.stderr


def test_user_kafka_settings_override_tuning_but_not_the_bounds(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from confluent_kafka import Consumer, Producer

    monkeypatch.setenv("NINES_TEST_PW", "pw")
    cfg = ProbeConfig(
        bootstrap="a:1",
        echo_bootstrap="b:2",
        rate=10,
        loss_timeout="10s",
        echo_buffer=500,
        kafka={
            "linger.ms": "2",
            "acks": "1",
            "fetch.wait.max.ms": "100",
            # an override of a pinned key is refused (tests/unit/core/test_kafka_conf.py); the
            # value nines uses is accepted and changes nothing
            "enable.auto.commit": "false",
            "sasl.password": "env:NINES_TEST_PW",
        },
    )
    c = cfg.clients()
    assert c["producer"]["linger.ms"] == c["echo_producer"]["linger.ms"] == "2"
    assert c["producer"]["acks"] == "1"
    assert c["consumer"]["fetch.wait.max.ms"] == "100"
    assert c["producer"]["message.timeout.ms"] == 15_000  # loss timeout + 5 s: not overridden
    # pinned: the queue bounds, where each client connects, and a consumer that never commits
    assert c["producer"]["queue.buffering.max.messages"] == 100_000
    assert c["echo_producer"]["queue.buffering.max.messages"] == 500
    assert c["consumer"]["enable.auto.commit"] is False
    assert [c[k]["bootstrap.servers"] for k in ("producer", "consumer", "echo_producer")] == [
        "a:1",
        "a:1",
        "b:2",
    ]
    assert all(v["sasl.password"] == "pw" for v in c.values())
    # librdkafka itself accepts every key and value (an unknown one raises KafkaException)
    for name, conf in c.items():
        client = Consumer(conf) if name == "consumer" else Producer(conf)
        if name == "consumer":
            client.close()
        else:
            client.flush(0)


def test_schedule_sends_in_intended_order_over_many_partitions() -> None:
    """The heap gives exactly the order of a full scan (by intended time, then partition)."""
    parts = [7, 3, 11, 0, 5]
    s = Schedule(parts, rate_per_s=333.333, t0_us=T0)
    got = []
    for _ in range(2000):
        due = s.next_due()
        got.append(due)
        s.advance(due[1])
    expected = sorted((s.intended_us(p, k), p, k) for p in parts for k in range(400))
    assert got == expected
    # advancing a partition that is not the earliest keeps the schedule consistent
    s.advance(parts[-1])
    assert s.next_due() == min((s.intended_us(p, q), p, q) for p, q in s.next_seq.items())
