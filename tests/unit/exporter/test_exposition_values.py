"""The value encodings a scrape joins onto cached label prefixes are the ones the reference
encoders write: ``floatToGoString`` for text, a ``<d`` double in a gauge Metric for protobuf."""

from __future__ import annotations

import struct

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client.utils import floatToGoString

from core import promproto
from monitor.exporter import protobuf, samples, text

MICROS = st.integers(0, 10**13)  # up to 10^7 s: past where the text switches to an exponent


@settings(max_examples=200, deadline=None)
@given(st.lists(MICROS, max_size=50))
def test_values_are_encoded_as_the_reference_encoders_write_them(values_us: list[int]) -> None:
    us = np.array(values_us, dtype=np.int64)
    seconds = [v / 1e6 for v in values_us]
    want_text = [f"{floatToGoString(s)}\n".encode() for s in seconds]
    assert text.go_texts(us / 1e6) == want_text
    assert text.text_seconds(us) == want_text  # cached: the same again
    assert text.text_seconds(us) == want_text
    assert protobuf.pb_doubles(us / 1e6) == [struct.pack("<d", s) for s in seconds]
    assert text.text_counts(us) == [f"{floatToGoString(v)}\n".encode() for v in values_us]


def test_a_cached_prefix_and_a_value_are_the_whole_sample() -> None:
    from core.windows import SeriesKey

    s = SeriesKey("c", 'od"d\\topic', "7", "e2e")
    pb = samples.series_prefixes(s, "10s", ["0.5", "0.99"], "protobuf", held=True)
    labels = promproto.labels(
        {"cluster": "c", "kind": "e2e", "partition": "7", "topic": s.topic, "window": "10s"}
    )
    assert pb.max + struct.pack("<d", 0.25) == promproto.gauge(labels, 0.25)
    with_q = promproto.labels(
        {"cluster": "c", "kind": "e2e", "partition": "7", "q": "0.99", "topic": s.topic}
        | {"window": "10s"}
    )
    assert pb.quantiles[1] + struct.pack("<d", 0.5) == promproto.gauge(with_q, 0.5)
    plain = samples.series_prefixes(s, "10s", ["0.5", "0.99"], "text", held=False)
    assert plain.quantiles[0] == (
        b'nines_latency_seconds{cluster="c",kind="e2e",partition="7",q="0.5",'
        b'topic="od\\"d\\\\topic",window="10s"} '
    )
    assert plain.peak is None and plain.quantile_peaks == (None, None)  # held only for "all"
    assert plain.lost is not None  # e2e: it has a lost gauge
