"""A hostile echo topic: every record is counted by reason, the job stays up, windows stay exact."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
from kafka_cluster import producer, unique_topic
from stream_jobs import Collector, job_config

from core.echo import MAX_ECHO_BYTES, MAX_ECHO_DEPTH, Echo, encode_record
from core.hdr import HdrLayout, SparseHistogram
from streaming.job import StreamJob

LAYOUT = HdrLayout()
YEAR_US = 365 * 86_400 * 1_000_000


def echo(seq: int, at_us: int, latency_us: int = 900) -> bytes:
    return encode_record(
        Echo(
            "p",
            "c",
            "nines.probe",
            seq % 2,
            1,
            seq,
            512,
            at_us,
            at_us + 5,
            None,
            at_us + latency_us,
        )
    )


def extra(raw: bytes, fragment: bytes) -> bytes:
    return raw[:-1] + b"," + fragment + b"}"


def hostile_shapes(now_us: int) -> list[tuple[str, bytes | None]]:
    """(reason, value): what broken or malicious producers write, one of each kind."""
    good = echo(0, now_us - 3_600_000_000)
    return [
        ("too_deep", b"[" * 1000),
        ("too_deep", extra(good, b'"x":' + b'{"a":' * 5000 + b"1" + b"}" * 5000)),
        ("too_deep", extra(good, b'"x":' + b"[" * MAX_ECHO_DEPTH + b"]" * MAX_ECHO_DEPTH)),
        ("tombstone", None),
        ("not_json", b""),
        ("not_utf8", b"\xff\xfe\xfd"),
        ("not_utf8", good.replace(b'"p"', b'"\xc3\x28"')),
        ("not_utf8", extra(good, b'"x":"\xe2\x82"')),
        ("not_utf8", good.replace(b'"c"', b'"\\ud800"')),
        ("non_finite", good.replace(b'"size":512', b'"size":NaN')),
        ("non_finite", good.replace(b'"seq":0', b'"seq":Infinity')),
        ("duplicate_key", extra(good, b'"intended_us":1')),
        ("bad_type", good.replace(b'"seq":0', b'"seq":' + b"9" * 25)),  # beyond 64 bits
        ("not_object", b"null"),
        ("not_object", b"[1,2,3]"),
        ("not_object", b'"an echo"'),
        ("not_json", b"{not json"),
        ("version", b'{"v": 9}'),
        ("too_large", good + b" " * MAX_ECHO_BYTES),
        ("label_too_long", good.replace(b'"c"', b'"' + b"c" * 4096 + b'"')),  # a 4 KiB cluster
        ("label_too_long", good.replace(b'"nines.probe"', b'"' + b"t" * 250 + b'"')),
        # a probe host whose clock runs a year ahead: schema-valid, but it must not move time
        ("future", echo(1, now_us + YEAR_US)),
    ]


def test_a_hostile_topic_is_counted_by_reason_and_good_windows_stay_exact(
    broker: Any, spark: Any
) -> None:
    topic = unique_topic(broker, 2)
    now_us = int(time.time() * 1_000_000)
    t0 = (now_us // 60_000_000 * 60 - 7200) * 1_000_000  # aligned, two hours ago
    shapes = hostile_shapes(now_us)
    hostile = [shapes[i % len(shapes)] for i in range(999)]
    # one 1 MB value: the embedded broker keeps only ~5 MiB per partition and deletes older
    # records beyond that before the job starts; the unit tests parse 10 MB values
    hostile.append(("too_large", b"{" + b"[" * 1_000_000 + b"}"))
    want_bad: dict[str, int] = {}
    for reason, _ in hostile:
        want_bad[reason] = want_bad.get(reason, 0) + 1
    prod = producer(broker.bootstrap, **{"linger.ms": 20, "message.max.bytes": 16 << 20})
    for i, (_, value) in enumerate(hostile):
        prod.produce(topic, value=value, partition=i % 2)
    prod.flush()
    # then good echoes: 30 s at 20/s, latencies 1..5 ms, and a pusher to close their windows
    rng = np.random.default_rng(7)
    good = [(seq, t0 + seq * 50_000, int(rng.integers(1000, 5000))) for seq in range(600)]
    good.append((10**6, t0 + 300_000_000, 900))  # the pusher: its window closes later, too
    for seq, at_us, lat in good:
        prod.produce(topic, value=echo(seq, at_us, lat), partition=seq % 2)
    prod.flush()

    sink = Collector()
    job = StreamJob(
        job_config(broker.bootstrap, topic),
        spark=spark,
        on_batch=sink,
    )
    job.start()
    try:
        sink.wait(lambda s: sum(1 for w in s.windows if w.series.partition == "all") >= 3, 180)
        # bad rows are counted in the window of the batch's watermark; a second pusher closes it
        prod.produce(topic, value=echo(10**6 + 1, t0 + 600_000_000), partition=1)  # stays open
        prod.flush()
        sink.wait(
            lambda s: (
                sum(s.counters.bad.values()) >= len(hostile)
                and sum(s.counters.echoes.values()) >= len(good)
            ),
            180,
        )
        time.sleep(2)  # a further batch or two: nothing more may arrive
        assert job.query.isActive and job.query.exception() is None
    finally:
        job.stop()

    assert sink.counters.bad == want_bad
    assert not sink.counters.late  # the future echo did not move the watermark a year ahead
    got = {
        (w.window_start_us, w.series.partition): w
        for w in sink.windows
        if w.series.kind == "e2e" and w.series.topic == "nines.probe" and not w.series.broker
    }
    exact: dict[tuple[int, str], list[int]] = {}
    for seq, at_us, lat in good:
        start = at_us - at_us % 10_000_000
        for part in (str(seq % 2), "all"):
            exact.setdefault((start, part), []).append(lat)
    assert set(got) == set(exact)
    for key, values in exact.items():
        ref = SparseHistogram.from_values(LAYOUT, values)
        assert np.array_equal(got[key].hist.index, ref.index), key
        assert np.array_equal(got[key].hist.count, ref.count), key
        assert got[key].hist.max_us == max(values)
    assert sum(sink.counters.echoes.values()) == len(good)
    assert not sink.counters.data_loss
