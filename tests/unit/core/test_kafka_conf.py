"""Pinned librdkafka settings: every override refused in one line naming the key; tuning stays."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from core.config import ConfigError, build
from core.kafka_conf import PROBE_PINNED, STREAM_PINNED, Pin, check_pinned
from probes.config import ProbeConfig
from streaming.config import StreamConfig

ROOT = Path(__file__).resolve().parents[3]
#: A value that must never be shown (a ``kafka:`` value may be a secret).
SECRET = "s3cr3t-Value-42"
STAGES: list[tuple[str, type[Any], dict[str, Pin]]] = [
    ("stream", StreamConfig, STREAM_PINNED),
    ("probe", ProbeConfig, PROBE_PINNED),
]
CASES = [(stage, model, key) for stage, model, pinned in STAGES for key in pinned]


def spellings(key: str) -> list[str]:
    return [key, key.upper(), f" {key} "]


@pytest.mark.parametrize(("stage", "model", "key"), CASES)
def test_an_override_of_a_pinned_key_is_one_line(stage: str, model: type[Any], key: str) -> None:
    for spelled in spellings(key):
        with pytest.raises(ConfigError) as err:
            build(model, {"bootstrap": "k:9092", "kafka": {spelled: SECRET}}, prefix=stage)
        message = str(err.value)
        assert message.startswith(f"{stage}.kafka: {spelled.strip()} is pinned"), message
        assert "\n" not in message and SECRET not in message
        assert "linger.ms" in message  # names what stays the user's


@pytest.mark.parametrize(("stage", "model", "pinned"), STAGES, ids=[s for s, _, _ in STAGES])
def test_the_pinned_value_itself_and_tuning_knobs_are_accepted(
    stage: str, model: type[Any], pinned: dict[str, Pin]
) -> None:
    same = {}
    for key, pin in pinned.items():
        if pin.value in ("true", "false"):
            same[key] = pin.value.upper() if pin.value == "true" else "0"
        elif pin.value is not None:
            same[key] = pin.value
    tuning = {"acks": "1", "linger.ms": "5", "fetch.wait.max.ms": "100", "client.id": "x"}
    config = build(model, {"bootstrap": "k:9092", "kafka": {**same, **tuning}}, prefix=stage)
    assert config.kafka == {**same, **tuning}


def test_every_pin_says_why() -> None:
    for _, _, pinned in STAGES:
        for key, pin in pinned.items():
            assert key == key.lower() and pin.why, key
    assert check_pinned({"acks": "all"}, STREAM_PINNED) == {"acks": "all"}


def test_the_stream_cli_refuses_an_override_in_one_line(tmp_path: Path) -> None:
    config = tmp_path / "nines.yaml"
    config.write_text(
        "stream:\n  bootstrap: 127.0.0.1:9\n  kafka:\n"
        f"    auto.offset.reset: latest\n    sasl.password: {SECRET}\n"
    )
    out = subprocess.run(
        [sys.executable, "-m", "monitor", "stream", "--config", str(config)],
        capture_output=True, text=True, timeout=60, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert out.returncode == 2
    assert out.stderr.startswith("nines stream: error: stream.kafka: auto.offset.reset is pinned")
    assert out.stderr.count("\n") == 1 and SECRET not in out.stderr
