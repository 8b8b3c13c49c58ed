"""The stream settings the source reads cross Spark's string options through one codec, typed."""

from __future__ import annotations

import dataclasses

import pytest

from streaming.config import StreamConfig
from streaming.options import SETTINGS, SourceOptions, decode_options, encode_options


def test_every_setting_comes_back_with_its_type_and_value() -> None:
    config = StreamConfig(
        bootstrap="k:9092",
        echo_topic="echoes",
        starting_offsets="earliest",
        max_records_per_batch=20,
        max_clock_skew="90s",
        max_series=7,
        kafka={"security.protocol": "SSL"},
        windows="5s,1m",
        digits=2,
    )
    options = encode_options(config, "/ckpt", 3, stall_timeout_s=2.5)
    assert all(isinstance(v, str) for v in options.values())  # Spark passes strings only
    # Spark lower-cases option names; the decoder reads them either way
    back = decode_options({k.upper(): v for k, v in options.items()})
    for name in SETTINGS:
        assert getattr(back, name) == getattr(config, name), name
        assert type(getattr(back, name)) is type(getattr(config, name)), name
    assert back.max_clock_skew == 90.0  # seconds, as in the YAML's model: never a µs string
    assert (back.windows, back.layout) == (config.spec, config.layout)
    assert (back.checkpoint, back.max_input_partitions, back.stall_timeout_s) == ("/ckpt", 3, 2.5)


def test_a_missing_option_is_named_never_defaulted() -> None:
    options = encode_options(StreamConfig(bootstrap="k:9092"), None, 1)
    for name in [f.name for f in dataclasses.fields(SourceOptions)]:
        rest = {k: v for k, v in options.items() if k != name}
        with pytest.raises(ValueError, match=f"needs option {name}:"):
            decode_options(rest)
