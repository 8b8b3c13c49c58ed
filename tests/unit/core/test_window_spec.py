"""``WindowSpec``: parsed once, validated once, carried through Spark's option string intact."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from core.windows import DEFAULT_WINDOWS, WindowSpec, window_end_us, window_start_us


def test_names_are_sorted_deduplicated_and_labelled() -> None:
    spec = WindowSpec.from_names("1h, 10s,1m,10s")
    assert spec.seconds == (10, 60, 3600)
    assert spec.names == ("10s", "1m", "1h")
    assert spec.resolutions_us == {"10s": 10_000_000, "1m": 60_000_000, "1h": 3_600_000_000}
    assert (spec.finest, spec.finest_us, spec.span_us("1m")) == ("10s", 10_000_000, 60_000_000)
    assert WindowSpec.from_names(["1m", "5s"]) == WindowSpec((5, 60))
    assert DEFAULT_WINDOWS.names == ("10s", "1m", "1h")


@pytest.mark.parametrize(
    ("names", "message"),
    [
        ("", "need at least one window"),
        (" , ", "need at least one window"),
        ("500ms", "windows must be whole seconds, at least 1s"),
        ("500ms,1s", "windows must be whole seconds, at least 1s"),
        ("0s,10s", "windows must be whole seconds, at least 1s"),
        ("10s,15s", "every window must be a multiple of the finest (10s)"),
        ("7s,1m", "every window must be a multiple of the finest (7s)"),
        ("soon", "not a duration"),
    ],
)
def test_invalid_specs_raise_one_line(names: str, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        WindowSpec.from_names(names)


def test_the_constructor_validates_too() -> None:
    with pytest.raises(ValueError, match="multiple of the finest"):
        WindowSpec((10, 25))
    with pytest.raises(ValueError, match="at least one window"):
        WindowSpec(())


spec_seconds = st.lists(st.integers(1, 120), min_size=1, max_size=4).flatmap(
    lambda ms: st.integers(1, 30).map(lambda base: (base, *(base * m for m in ms)))
)


@given(spec_seconds)
def test_option_string_round_trip(seconds: tuple[int, ...]) -> None:
    spec = WindowSpec(seconds)
    text = spec.to_option()
    assert text == ",".join(spec.names)
    assert WindowSpec.from_option(text) == spec
    assert WindowSpec.from_option(text).resolutions_us == spec.resolutions_us


def test_the_spark_option_is_parsed_back_by_the_source() -> None:
    from streaming.config import StreamConfig
    from streaming.options import encode_options
    from streaming.source import KafkaEchoReader

    config = StreamConfig(bootstrap="x:1", windows="5s,1m")
    options = encode_options(config, None, 1)
    # Spark's option names are case-insensitive: the reader sees them however they are spelled
    reader = KafkaEchoReader({k.upper(): v for k, v in options.items()})
    assert reader.windows == config.spec == WindowSpec.from_names("5s,1m")


def test_the_stream_config_builds_the_spec_and_layout_once() -> None:
    from streaming.config import StreamConfig

    cfg = StreamConfig(bootstrap="x:1", windows="1m,5s", digits=2, lowest_us=10, highest="2m")
    assert cfg.spec == WindowSpec((5, 60)) and cfg.windows == cfg.spec.names
    assert (cfg.layout.lowest_us, cfg.layout.highest_us, cfg.layout.digits) == (10, 120e6, 2)
    assert StreamConfig(bootstrap="x:1").spec == DEFAULT_WINDOWS


times_us = st.integers(0, 2**62)
spans_us = st.integers(1, 10**12)


@given(times_us, spans_us)
def test_window_rule(t: int, span: int) -> None:
    start = window_start_us(t, span)
    assert start % span == 0 and start <= t < start + span
    assert window_end_us(t, span) == start + span


@given(st.lists(times_us, min_size=1, max_size=50), spans_us)
def test_window_rule_agrees_on_ints_and_arrays(ts: list[int], span: int) -> None:
    """The Arrow source evaluates the rule on numpy arrays; it must equal the scalar rule."""
    arr = np.array(ts, dtype=np.int64)
    assert window_start_us(arr, span).tolist() == [window_start_us(t, span) for t in ts]
    assert window_end_us(arr, np.int64(span)).tolist() == [window_end_us(t, span) for t in ts]


@given(spec_seconds, times_us)
def test_finer_windows_nest_in_coarser_ones(seconds: tuple[int, ...], t: int) -> None:
    spec = WindowSpec(seconds)
    fine = spec.window_start_us(t)
    for res in spec.names:
        coarse = spec.window_start_us(t, res)
        assert coarse <= fine and spec.window_end_us(t) <= spec.window_end_us(t, res)
