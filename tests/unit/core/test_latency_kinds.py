"""One definition per latency kind and one owner of the HDR layout's checks."""

from __future__ import annotations

import pytest

from core.config import ConfigError, build
from core.echo import LATENCY_SPANS, Echo
from core.hdr import HdrLayout, LayoutError
from core.windows import KINDS

T0 = 1_795_000_000_000_000


def test_every_measured_kind_is_an_exported_kind_measured_from_the_intended_time() -> None:
    assert list(LATENCY_SPANS) == [k for k in KINDS if k != "hiccup"]
    assert {span.start for span in LATENCY_SPANS.values()} == {"intended_us"}


def test_echo_latencies_follow_the_table() -> None:
    e = Echo("p", "c", "t", 0, 1, 7, 512, T0, T0 + 10, T0 + 900, T0 + 1500)
    assert [e.latency_us(k) for k in LATENCY_SPANS] == [1500, 900, 10]
    assert (e.end_to_end_us, e.publish_us, e.send_lag_us) == (1500, 900, 10)
    lost = Echo("p", "c", "t", 0, 1, 7, 512, T0, T0 + 10, None, None, True, 30_000_000)
    assert [lost.latency_us(k) for k in LATENCY_SPANS] == [30_000_000, None, 10]


@pytest.mark.parametrize(
    ("kwargs", "field", "reason"),
    [
        ({"digits": 0}, "digits", "must be 1..4 significant digits"),
        ({"digits": 5}, "digits", "must be 1..4 significant digits"),
        ({"lowest_us": 0}, "lowest_us", "must be at least 1"),
        ({"lowest_us": 10, "highest_us": 19}, "highest_us", "must be at least twice lowest_us"),
    ],
)
def test_layout_errors_name_the_field(kwargs: dict[str, int], field: str, reason: str) -> None:
    with pytest.raises(LayoutError) as err:
        HdrLayout(**kwargs)
    assert (err.value.field, err.value.reason) == (field, reason)


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"digits": 5}, "stream.digits: must be 1..4 significant digits (got 5)"),
        ({"lowest_us": 0}, "stream.lowest_us: Input should be greater than or equal to 1"),
        ({"lowest_us": 600, "highest": "1ms"}, "stream.config: highest must be at least twice"),
        ({"source": "kafka"}, "stream.source: unknown key"),
    ],
)
def test_stream_config_reports_the_layout_errors_in_its_own_keys(
    values: dict[str, object], message: str
) -> None:
    from streaming.config import StreamConfig

    with pytest.raises(ConfigError) as err:
        build(StreamConfig, {"bootstrap": "x:1", **values}, prefix="stream")
    assert str(err.value).startswith(message) and "\n" not in str(err.value)
