"""``nines stream`` and ``nines probe`` flags come from the config models, defaults included.

The flag names are published (users' scripts call them), so they are listed here; the defaults are
not: each flag's help must end with the model's default as users write it.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys

import pytest

from core.config import StageConfig
from core.settings import add_flags, default_text, flag, flag_values, setting
from monitor.pipeline import PipelineConfig, flags
from probes.cli import FLAGS as PROBE_FLAGS
from probes.config import ProbeConfig

#: The flags users' scripts rely on (a rename is a breaking change: CHANGELOG.md).
PUBLISHED = {
    "stream": "--config --bootstrap --echo-topic --kafka-login --aws-region --windows --watermark "
    "--digits --checkpoint "
    "--archive --metrics-port --metrics-host --web-config-file --trigger "
    "--starting-offsets --master --spark-log",
    "probe": "--config --bootstrap --nats-jetstream --redis-streams --echo-bootstrap --kafka-login "
    "--aws-region --topic "
    "--echo-topic --rate --schedule --size --cluster --probe-id --loss-timeout --duration "
    "--echo-format --metrics-host --web-config-file --metrics-port --manage-topic --rebalance "
    "--summary-file --fleet-group",
}
MODELS = {"stream": (PipelineConfig, flags()), "probe": (ProbeConfig, PROBE_FLAGS)}


def help_text(command: str) -> str:
    out = subprocess.run(
        [sys.executable, "-m", "monitor", command, "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        env={"COLUMNS": "400", "PATH": "/usr/bin:/bin"},
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


@pytest.mark.parametrize("command", sorted(PUBLISHED))
def test_the_flags_are_the_published_ones_with_the_models_defaults(command: str) -> None:
    text = help_text(command)
    options = text.split("options:", 1)[1].split("examples:", 1)[0]
    shown = re.findall(r"^  (--[a-z-]+)", options, re.M)
    assert shown == PUBLISHED[command].split()
    model, names = MODELS[command]
    for name in names:
        line = re.search(rf"^  {flag(name)}\b.*?(?=^  -|\Z)", options, re.M | re.S)
        assert line, name
        helped = " ".join(line.group(0).split())
        default = default_text(model, name)
        if default is not None and model.model_fields[name].annotation is not bool:
            assert f"(default {default}" in helped, (name, helped)
        assert model.model_fields[name].description in helped


def test_a_flag_shows_unit_note_and_choices_and_reads_back_by_field() -> None:
    class Stage(StageConfig):
        wait: float = setting(90.0, unit="duration", help="how long")
        port: int = setting(9, note="0 = any", help="a port")
        mode: str = setting("a", help="the mode")
        on: bool = setting(False, help="switch")

    parser = argparse.ArgumentParser()
    add_flags(parser, Stage, ("wait", "port", "mode", "on"))
    helps = {a.dest: a.help for a in parser._actions}
    assert helps["wait"] == "how long (default 90s)"
    assert helps["port"] == "a port (default 9; 0 = any)"
    assert helps["on"] == "switch"
    args = parser.parse_args(["--port", "7", "--on"])
    assert flag_values(args, ("wait", "port", "mode", "on")) == {
        "wait": None,
        "port": 7,
        "mode": None,
        "on": True,
    }
    with pytest.raises(SystemExit):
        parser.parse_args(["--port", "x"])  # an int field's flag is read as int by argparse
