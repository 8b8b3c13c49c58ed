"""The CLI front door: every subcommand has working --help, bad input exits 2 with one line."""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from monitor.cli import build_parser, main

ROOT = Path(__file__).resolve().parents[2]
#: What every subcommand's --help shows above its example command lines.
EXAMPLES_MARKER = "examples:"


def command_paths(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[str, ...]]:
    """Every subcommand and nested subcommand, found by walking argparse's subparsers."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield (*path, name)
                yield from command_paths(sub, (*path, name))


ALL_COMMANDS = sorted(command_paths(build_parser()))
SUBCOMMANDS = sorted({path[0] for path in ALL_COMMANDS})


def nines(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "monitor", *args], capture_output=True, text=True, timeout=timeout
    )


def test_all_issue_subcommands_exist() -> None:
    assert {"broker", "probe", "stream", "demo", "report", "alerts", "dashboards"} <= set(
        SUBCOMMANDS
    )
    # the walk finds nested subcommands too
    assert {("broker", "ctl"), ("alerts", "render"), ("dashboards", "push")} <= set(ALL_COMMANDS)


@pytest.mark.parametrize("command", SUBCOMMANDS)
def test_help_works(command: str) -> None:
    out = nines(command, "--help")
    assert out.returncode == 0, out.stderr
    assert "usage: nines" in out.stdout


@pytest.mark.parametrize("path", ALL_COMMANDS, ids=" ".join)
def test_every_help_exits_0_with_examples(
    path: tuple[str, ...], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main([*path, "--help"])
    assert exit_.value.code == 0
    text = capsys.readouterr().out
    assert text.startswith(f"usage: nines {' '.join(path)}"), text
    assert f"\n{EXAMPLES_MARKER}\n" in text, f"nines {' '.join(path)} --help has no examples"
    examples = text.split(f"\n{EXAMPLES_MARKER}\n", 1)[1]
    commands = [line.strip() for line in examples.splitlines() if line.strip().startswith("nines ")]
    assert commands, "the examples should show this command"
    assert all(c.startswith(f"nines {' '.join(path)}") for c in commands), commands
    assert "%%" not in text  # argparse does not %-format descriptions and epilogs


def test_top_level_help_and_version() -> None:
    out = nines("--help")
    assert out.returncode == 0 and "demo" in out.stdout
    assert nines("--version").stdout.startswith("nines ")


def test_documented_error_example_is_the_real_message(capsys: pytest.CaptureFixture[str]) -> None:
    doc = (ROOT / "docs" / "configuration.md").read_text()
    m = re.search(r"`nines probe --rate 0` prints `([^`]+)`", doc)
    assert m, "docs/configuration.md lost its example error message"
    assert main(["probe", "--bootstrap", "127.0.0.1:1", "--rate", "0"]) == 2
    assert capsys.readouterr().err == m.group(1) + "\n"


def test_a_stop_signal_that_a_library_turns_into_its_own_error_still_ends_quietly(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """CI saw a SIGINT land while pydantic-core built a model's validator: it wrapped the
    handler's SystemExit in a SchemaError, a traceback and exit 1. Any error the interruption
    becomes ends the start-up with 0; the same error without a stop signal still surfaces."""
    import signal

    import probes.cli

    def interrupted(_args: argparse.Namespace) -> int:
        try:
            signal.raise_signal(signal.SIGINT)  # delivered here, in the main thread
        except SystemExit as exc:
            raise RuntimeError("a library's own error") from exc
        return 1

    def failed(_args: argparse.Namespace) -> int:
        raise RuntimeError("a library's own error")

    before = signal.getsignal(signal.SIGINT)
    monkeypatch.setattr(probes.cli, "run", interrupted)
    assert main(["probe", "--bootstrap", "127.0.0.1:9"]) == 0
    assert signal.getsignal(signal.SIGINT) is before  # an in-process caller gets its own back
    monkeypatch.setattr(probes.cli, "run", failed)
    with pytest.raises(RuntimeError):
        main(["probe", "--bootstrap", "127.0.0.1:9"])


@pytest.mark.parametrize("how", ["python -m monitor", "nines"])
def test_a_stop_signal_while_the_interpreter_exits_keeps_the_status(how: str) -> None:
    """A command that stopped cleanly keeps its status when another SIGTERM comes while the
    interpreter exits (a rollout's second signal): the handlers were restored to the default
    then, and a fleet replica so ended with 143. The signal is sent from an atexit hook, the
    last thing that runs, so the test does not depend on timing."""
    entry = (
        "import runpy; runpy.run_module('monitor', run_name='__main__')"
        if how == "python -m monitor"
        else "from monitor.cli import run; run()"
    )
    code = (
        "import atexit, os, signal, sys\n"
        "atexit.register(lambda: os.kill(os.getpid(), signal.SIGTERM))\n"
        "sys.argv = ['nines', '--version']\n" + entry
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
