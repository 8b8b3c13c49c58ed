"""What the probe accepts, the stream keeps: labels within the stream's limits, a rate that fills
every finest window, and a ``--duration`` the probe runs for whole, at any rate.

Labels are generated near each limit (ASCII and 2- to 4-byte characters, lone surrogates as a
shell's non-UTF-8 argument becomes): every one the probe's config accepts, encoded as the probe
encodes its echoes (v1 and v2), is parsed by the stream's own parser as a good echo; every one
it refuses, the stream would have dropped. The duration runs the whole agent on the loopback
transport of ``test_probe_loopback`` (an in-memory broker), then the CLI on the mock cluster.
"""

from __future__ import annotations

import math
import subprocess
import sys
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from core.echo import Echo, encode_record
from core.echo_v2 import encode_batch
from core.labels import MAX_LABEL_BYTES
from probes import ProbeAgent, ProbeConfig
from probes.config import LABEL_FIELDS, MIN_RATE, MIN_RATE_WINDOW_S
from probes.transport import Layout
from streaming.parse import parse_values
from tests.unit.probes.test_probe_loopback import Loopback, Sink

T0 = 1_800_000_000_000_000


@st.composite
def label_values(draw: st.DrawFn, field: str) -> str:
    """A value near the limit of ``field`` in UTF-8 bytes, sometimes not UTF-8 at all."""
    limit = MAX_LABEL_BYTES[LABEL_FIELDS[field]]
    unit = draw(st.sampled_from(["a", "é", "€", "😀", "\udcff"]))
    per = len(unit.encode(errors="surrogatepass"))
    n = draw(st.integers(max(1, (limit - 6) // per), limit // per + 3))
    return draw(st.sampled_from(["", "x", "yz"])) + unit * n


def stream_verdicts(probe: str, cluster: str) -> list[str | None]:
    """The stream parser's reason for one echo and one hiccup of these labels (None: kept),
    as v1 records and as a v2 batch, encoded as the probe encodes them."""
    echo = Echo(probe, cluster, "nines.probe", 0, 1, 0, 10, T0, T0 + 1, None, T0 + 9)
    values = [encode_record(echo), encode_batch([echo])]
    return [row["reason"] for row in parse_values(values).to_pylist()]


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(sorted(LABEL_FIELDS)), st.data())
def test_a_label_the_probe_accepts_the_stream_keeps(field: str, data: st.DataObject) -> None:
    value = data.draw(label_values(field))
    try:
        config = ProbeConfig(bootstrap="127.0.0.1:9092", **{field: value})
    except ValidationError as exc:
        message = str(exc)
        assert field in message
        limit = MAX_LABEL_BYTES[LABEL_FIELDS[field]]
        assert f"at most {limit} bytes" in message or "UTF-8" in message, message
        try:
            size = len(value.encode())
        except UnicodeEncodeError:
            return  # not UTF-8: no echo could carry it
        assert size > limit  # refused only over the stream's limit
        return
    verdicts = stream_verdicts(config.probe_id, config.cluster)
    assert verdicts == [None, None], (field, len(value.encode()), verdicts)


@pytest.mark.parametrize(("flag", "length"), [("--cluster", 300), ("--probe-id", 200)])
def test_the_issue_examples_are_one_line_exit_2(flag: str, length: int) -> None:
    started = time.monotonic()
    out = subprocess.run(
        [sys.executable, "-m", "monitor", "probe", "--bootstrap", "127.0.0.1:1", flag,
         "x" * length],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    field = flag.removeprefix("--").replace("-", "_")
    assert len(lines) == 1 and lines[0].startswith(f"nines probe: error: probe.{field}:"), lines
    assert "label_too_long" in lines[0] and "128 bytes" in lines[0]
    assert time.monotonic() - started < 20


@settings(max_examples=200, deadline=None)
@given(st.floats(min_value=1e-9, max_value=1000.0, allow_nan=False))
def test_a_rate_under_one_message_per_finest_window_is_refused_naming_the_bound(
    rate: float,
) -> None:
    try:
        config = ProbeConfig(bootstrap="127.0.0.1:9092", rate=rate)
    except ValidationError as exc:
        assert rate < MIN_RATE
        assert f"at least {MIN_RATE:g}/s" in str(exc) and f"({MIN_RATE_WINDOW_S:g}s)" in str(exc)
        return
    assert config.rate >= MIN_RATE
    assert config.rate * MIN_RATE_WINDOW_S >= 1  # a message per partition per finest window


def test_the_bound_is_the_stream_default_finest_window() -> None:
    from streaming.config import StreamConfig

    finest_s = StreamConfig(bootstrap="x:1").spec.finest_us / 1e6
    assert finest_s == MIN_RATE_WINDOW_S and 1 / finest_s == MIN_RATE
    ProbeConfig(bootstrap="127.0.0.1:9092", rate=f"{60 / finest_s:g}/m")  # the bound itself
    with pytest.raises(ValidationError, match=r"probe|rate"):
        ProbeConfig(bootstrap="127.0.0.1:9092", rate="5/m")


def run_agent(rate: float, partitions: int, duration_s: float) -> tuple[float, int]:
    """Seconds from the schedule's start to the sender's end, and the messages sent."""
    layout = Layout({p: 1 for p in range(partitions)}, frozenset({1}))
    config = ProbeConfig(
        bootstrap="loopback:0",
        rate=rate,
        duration=duration_s,
        loss_timeout=1.0,
        hiccup_interval=0.2,
        metrics_port=0,
        probe_id="limits",
        cluster="c",
    )
    agent = ProbeAgent(config, transport=Loopback(layout, set()), echo_sink=Sink()).start()
    try:
        assert agent.wait(duration_s + 10)
        ended_us = agent.clock.now_us()
    finally:
        agent.stop(1.0)
    assert agent.schedule is not None
    sent = sum(agent.schedule.next_seq.values())
    return (ended_us - agent.schedule.t0_us) / 1e6, sent


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.floats(min_value=MIN_RATE, max_value=4.0),
    st.integers(1, 4),
    st.floats(min_value=0.2, max_value=1.2),
)
def test_the_probe_runs_the_whole_duration_at_any_rate(
    rate: float, partitions: int, duration_s: float
) -> None:
    ran_s, sent = run_agent(rate, partitions, duration_s)
    assert duration_s - 0.01 <= ran_s < duration_s + 1.0, (ran_s, duration_s)
    # every message intended before the end is sent, and none after it (partition p's offset
    # in the schedule is p / (rate x partitions))
    step_s = 1 / rate
    want = sum(
        max(0, math.ceil((duration_s - p * step_s / partitions) / step_s))
        for p in range(partitions)
    )
    assert abs(sent - want) <= partitions, (sent, want)
