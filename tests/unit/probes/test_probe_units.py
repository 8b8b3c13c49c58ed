"""Pure parts of the probe: schedule, payload, tracker, config limits."""

from __future__ import annotations

import pytest

from monitor.config import ConfigError, build
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
    t.acked(0, 0, T0 + 300)
    e0 = t.received(0, 0, T0 + 800)
    assert e0 is not None and e0.end_to_end_us == 800 and e0.publish_us == 300
    assert t.received(0, 0, T0 + 900) is None  # duplicate
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
