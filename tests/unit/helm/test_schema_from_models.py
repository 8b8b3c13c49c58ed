"""The chart refuses what the product refuses: rules derived from the product's models.

Each chart value that becomes a product setting is tried with generated values; whatever the
product's model refuses (``core.config.build`` of the probe's or the stream's section), the
chart must refuse too, at ``helm template`` (values.schema.json, or templates/checks.yaml for
rules between values), through helm-python-sdk as ``helm install`` would run it:

- durations (``lossTimeout``, ``watermark``, ``trigger``, ``peakHold``): negative, zero,
  malformed, with an exponent, in any case and spacing;
- topic names (``probes[].topic``, ``echoTopic``): exactly Kafka's rule, both ways;
- pinned librdkafka keys (``core.kafka_conf``'s ``PROBE_PINNED``, ``STREAM_PINNED``) in any case
  and spacing, with the pinned value in every spelling librdkafka reads and with others: exactly
  the model's answer, both ways;
- secrets (``core.kafka_conf.SECRET_SETTINGS``): never a literal, and the refusal never quotes it;
- an echo topic equal to a probe's topic, two probes of one cluster (or of one Deployment name
  once cut to 63 characters), a non-string image tag;
- a probe's rate: the probe's own bounds (at least one message per partition in each finest
  window); a cluster: a Kubernetes label value (63 characters), within the product's 128 bytes.

Numeric bounds of durations (``trigger`` at least 1ms, ``loss_timeout`` at most ~24 days, any
duration at most 10 years) stay the product's, refused in one line when the pod starts: a
pattern cannot compare numbers.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import helm_python as helm
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.config import ConfigError, build
from core.kafka_conf import PROBE_PINNED, SECRET_SETTINGS, STREAM_PINNED, Pin
from core.labels import MAX_CLUSTER_BYTES
from core.redact import is_secret_key
from core.units import parse_duration_s
from monitor.pipeline import PipelineConfig as StreamConfig
from probes.config import MAX_TOTAL_RATE, MIN_RATE, ProbeConfig

CHART = Path(__file__).parents[3] / "helm" / "nines"
MANY = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FEW = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
PROBE_BASE = {"bootstrap": "kafka:9092"}
STREAM_BASE = {"bootstrap": "kafka:9092"}
#: Kubernetes' limit on a label value, which a probe's cluster becomes (nines/cluster)
K8S_LABEL_VALUE_CHARS = 63


@functools.cache
def chart() -> Any:
    return helm.Chart.load(str(CHART))


def chart_refuses(values: dict[str, Any]) -> str | None:
    """The chart's refusal of ``values`` (schema, then templates), or None if it renders."""
    try:
        chart().validate_schema(values)
        chart().render(values, name="nines", namespace="monitoring")
    except helm.HelmError as exc:
        return str(exc)
    return None


def model_refuses(model: Any, values: dict[str, Any]) -> bool:
    try:
        build(model, values)
    except ConfigError:
        return True
    return False


def probe_values(**probe: Any) -> dict[str, Any]:
    return {"probes": [{"cluster": "prod", "bootstrap": "kafka:9092", **probe}]}


def stream_values(**stream: Any) -> dict[str, Any]:
    return {"stream": {"mode": "local", "bootstrap": "kafka:9092", **stream}}


# --- durations ----------------------------------------------------------------------------------

numbers = st.one_of(
    st.integers(0, 99).map(str),
    st.builds(lambda a, b: f"{a}.{b}", st.integers(0, 9), st.integers(0, 99)),
    st.sampled_from(["-1", "-0", "+5", "1e3", "1e-3", "inf", "nan", ".5", "5.", "0x10", ""]),
)
units = st.sampled_from(["", "us", "µs", "ms", "s", "m", "h", "d", "S", "Ms", "H", "sec", "w", "y"])
spaces = st.sampled_from(["", " ", "  "])
durations = st.lists(st.tuples(numbers, spaces, units), min_size=1, max_size=3).map(
    lambda parts: "".join(n + sp + u for n, sp, u in parts)
) | st.text(max_size=8)

#: Chart value → (the model and its section's field).
DURATIONS = {
    "lossTimeout": (ProbeConfig, "loss_timeout"),
    "watermark": (StreamConfig, "watermark"),
    "trigger": (StreamConfig, "trigger"),
    "peakHold": (StreamConfig, "peak_hold"),
}


@MANY
@given(st.sampled_from(sorted(DURATIONS)), durations)
def test_a_duration_the_product_refuses_is_refused_by_the_chart(name: str, text: str) -> None:
    model, field = DURATIONS[name]
    base = PROBE_BASE if model is ProbeConfig else STREAM_BASE
    values = probe_values(**{name: text}) if model is ProbeConfig else stream_values(**{name: text})
    if model_refuses(model, {**base, field: text}) and not in_range_only(text):
        assert chart_refuses(values), (name, text)


def in_range_only(text: str) -> bool:
    """Whether the product reads ``text`` as a positive duration (so refused only by a bound:
    ``trigger`` at least 1ms, ``loss_timeout`` at most ~24 days, which a pattern cannot state)."""
    try:
        return parse_duration_s(text) > 0
    except ValueError:
        return False


@MANY
@given(
    st.sampled_from(sorted(DURATIONS)),
    st.integers(1, 999),
    st.sampled_from(["ms", "s", "m", "h", "", "S", "MS"]),
    st.lists(st.tuples(st.integers(0, 59), st.sampled_from(["s", "ms"])), max_size=2),
)
def test_a_plain_positive_duration_is_accepted_by_both(
    name: str, first: int, unit: str, rest: list[tuple[int, str]]
) -> None:
    text = f"{first}{unit}" + ("".join(f"{n}{u}" for n, u in rest) if unit else "")
    model, field = DURATIONS[name]
    base = PROBE_BASE if model is ProbeConfig else STREAM_BASE
    values = probe_values(**{name: text}) if model is ProbeConfig else stream_values(**{name: text})
    if not model_refuses(model, {**base, field: text}):
        assert chart_refuses(values) is None, (name, text)


# --- topic names --------------------------------------------------------------------------------

topics = st.one_of(
    st.text(st.sampled_from("abcXYZ019._-"), min_size=0, max_size=12),
    st.text(max_size=12),
    st.sampled_from([".", "..", "...", "a" * 249, "a" * 250, "nines.probe", "a b", "a/b"]),
)


@MANY
@given(topics, st.booleans())
def test_topic_names_agree_with_the_product(topic: str, echo: bool) -> None:
    if echo:
        values: dict[str, Any] = {**probe_values(topic="nines.probe.x"), "echoTopic": topic}
        probe = {**PROBE_BASE, "topic": "nines.probe.x", "echo_topic": topic}
    else:
        values = probe_values(topic=topic)
        probe = {**PROBE_BASE, "topic": topic, "echo_topic": "nines.echoes"}
    refused = model_refuses(ProbeConfig, probe)
    assert bool(chart_refuses(values)) == refused, (topic, echo)


@FEW
@given(st.from_regex(r"[a-z][a-z0-9._-]{0,20}", fullmatch=True))
def test_an_echo_topic_equal_to_a_probe_topic_is_refused(topic: str) -> None:
    assert model_refuses(ProbeConfig, {**PROBE_BASE, "topic": topic, "echo_topic": topic})
    refusal = chart_refuses({**probe_values(topic=topic), "echoTopic": topic})
    assert refusal and "probes[0].topic: must differ from echoTopic" in refusal


# --- pinned and secret librdkafka settings ------------------------------------------------------


def spellings(key: str) -> list[str]:
    """How a user may write a key that the product reads as ``key``."""
    return [key, key.upper(), key.title(), f" {key} "]


def values_to_try(pin: Pin) -> list[str]:
    other = ["true", "false", "1", "0", "t", "f", "TRUE", " false ", "latest", "earliest", "x"]
    other += ["read_committed", "read_uncommitted", "READ_COMMITTED", ""]
    return other + ([pin.value, pin.value.upper()] if pin.value else [])


PINNED_CASES = [
    (stage, key, spelled, value)
    for stage, pins in (("probe", PROBE_PINNED), ("stream", STREAM_PINNED))
    for key, pin in pins.items()
    for spelled in spellings(key)
    for value in values_to_try(pin)
]


@pytest.mark.parametrize(("stage", "key", "spelled", "value"), PINNED_CASES)
def test_pinned_keys_agree_with_the_product(stage: str, key: str, spelled: str, value: str) -> None:
    if stage == "probe":
        refused = model_refuses(ProbeConfig, {**PROBE_BASE, "kafka": {spelled: value}})
        values = probe_values(kafka={spelled: value})
    else:
        refused = model_refuses(StreamConfig, {**STREAM_BASE, "kafka": {spelled: value}})
        values = stream_values(kafka={spelled: value})
    assert bool(chart_refuses(values)) == refused, (stage, spelled, value)


def test_every_secret_setting_is_one_the_redactor_hides() -> None:
    assert all(is_secret_key(k) for k in SECRET_SETTINGS)


@MANY
@given(
    st.sampled_from(SECRET_SETTINGS),
    st.text(min_size=1, max_size=30).map(lambda s: "Zq9" + s),
    st.sampled_from(["probe", "stream"]),
)
def test_a_literal_secret_is_refused_without_being_shown(key: str, secret: str, stage: str) -> None:
    kafka = {key: secret}
    values = probe_values(kafka=kafka) if stage == "probe" else stream_values(kafka=kafka)
    refusal = chart_refuses(values)
    assert refusal and key in refusal, (key, refusal)
    assert secret not in refusal and repr(secret)[1:-1] not in refusal


@pytest.mark.parametrize("key", SECRET_SETTINGS)
def test_a_secret_from_a_secret_is_accepted(key: str) -> None:
    env = [{"name": "KAFKA_SECRET", "secretName": "kafka", "key": "secret"}]
    assert chart_refuses(probe_values(kafka={key: "env:KAFKA_SECRET"}, secretEnv=env)) is None
    assert chart_refuses(probe_values(kafka={key: "file:/etc/nines/tls/key.pass"})) is None


# --- names and types ----------------------------------------------------------------------------


@FEW
@given(st.from_regex(r"[a-z0-9]([-a-z0-9]{0,20}[a-z0-9])?", fullmatch=True))
def test_two_probes_of_one_cluster_are_refused(cluster: str) -> None:
    one = {"cluster": cluster, "bootstrap": "kafka:9092"}
    other = {"cluster": cluster + "-b", "bootstrap": "kafka:9092"}
    assert chart_refuses({"probes": [one, other]}) is None
    refusal = chart_refuses({"probes": [one, other, dict(one)]})
    assert refusal and f"probes[2].cluster: {cluster} is also probes[0].cluster" in refusal


@pytest.mark.parametrize("tag", [1.10, 2, True, [], {}])
def test_a_non_string_image_tag_is_refused(tag: Any) -> None:
    values = {"image": {"repository": "ghcr.io/x/nines", "tag": tag}}
    refusal = chart_refuses(values)
    assert refusal and "/image/tag" in refusal, refusal
    assert chart_refuses({"image": {"repository": "ghcr.io/x/nines", "tag": "1.10"}}) is None


# --- what the probe accepts, the chart accepts, and no more -------------------------------------

rates = st.one_of(
    st.floats(min_value=0, max_value=2 * MAX_TOTAL_RATE, allow_nan=False),
    st.sampled_from([MIN_RATE, MIN_RATE * 0.999, MAX_TOTAL_RATE, MAX_TOTAL_RATE + 0.5, 1e-9]),
    st.integers(-5, 25_000),
)


@MANY
@given(rates)
def test_a_rate_the_probe_refuses_is_refused_by_the_chart(rate: float) -> None:
    probe_refuses = model_refuses(ProbeConfig, {**PROBE_BASE, "rate": rate})
    refusal = chart_refuses(probe_values(rate=rate))
    assert (refusal is not None) == probe_refuses, (rate, refusal)
    if refusal:
        assert "/probes/0/rate" in refusal, refusal


def test_the_chart_states_the_probes_rate_bounds() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text())
    rate = schema["properties"]["probes"]["items"]["properties"]["rate"]
    assert (rate["minimum"], rate["maximum"]) == (MIN_RATE, MAX_TOTAL_RATE)


dns_labels = st.integers(1, 140).flatmap(
    lambda n: st.from_regex(rf"[a-z0-9]([-a-z0-9]{{{max(n - 2, 0)}}}[a-z0-9])?", fullmatch=True)
)


@FEW
@given(dns_labels)
def test_a_cluster_is_a_kubernetes_label_value_within_the_probes_limit(cluster: str) -> None:
    refusal = chart_refuses(probe_values(cluster=cluster))
    # a label value holds at most 63 characters; the product's own limit is above it
    assert (refusal is not None) == (len(cluster) > K8S_LABEL_VALUE_CHARS), (cluster, refusal)
    within = cluster[:K8S_LABEL_VALUE_CHARS]
    assert not model_refuses(ProbeConfig, {**PROBE_BASE, "cluster": within})
    assert K8S_LABEL_VALUE_CHARS <= MAX_CLUSTER_BYTES


@FEW
@given(st.from_regex(r"[a-z0-9][-a-z0-9]{46,59}", fullmatch=True))
def test_two_clusters_whose_deployment_names_agree_once_cut_are_refused(stem: str) -> None:
    # nines-probe-<cluster> is cut to 63 characters: clusters that differ only past that collide
    one, other = stem + "-a1", stem + "-b2"
    two = [{"cluster": c, "bootstrap": "kafka:9092"} for c in (one, other)]
    # the first character that differs ("a" or "b") lies past the 63rd of nines-probe-<cluster>
    cut = len("nines-probe-") + len(stem) + len("-") >= 63
    refusal = chart_refuses({"probes": two})
    assert (refusal is not None) == cut, (stem, refusal)
    if refusal:
        assert f"probes[1].cluster: {other} names its Deployment" in refusal
