"""`nines demo`: every flag is checked before the broker starts; bad input: one line, exit 2."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest

import monitor.demo
from monitor.cli import main


def nines_demo(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "monitor", "demo", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--rate", "-5"], "rate: must be > 0"),
        (["--duration", "xx"], "duration: not a duration: 'xx'"),
    ],
)
def test_real_cli_exits_2_before_starting_anything(args: list[str], message: str) -> None:
    out = nines_demo(*args)
    assert out.returncode == 2, out.stderr
    assert out.stderr.splitlines() == [out.stderr.strip()], out.stderr
    assert out.stderr.startswith(f"nines demo: error: {message}"), out.stderr
    assert "Traceback" not in out.stderr
    assert "starting the embedded broker" not in out.stdout


BAD = [
    (["--rate", "0"], "rate: must be > 0"),
    (["--rate", "fast"], "rate: not a rate: 'fast'"),
    (["--rate", "nan"], "rate: must be a finite number"),
    (["--rate", "7000"], "rate: 7000/s × 3 partitions = 21000/s exceeds"),
    (["--duration=-1s"], "duration: not a duration: '-1s'"),
    (["--window", "7s"], "window: 7s and the 1m windows"),
    (["--window", "500ms"], "window: must be whole seconds"),
    (["--window", "soon"], "window: not a duration"),
    (["--watermark", "soon"], "watermark: not a duration: 'soon'"),
    (["--trigger", "0s"], "trigger: must be > 0"),
    (["--metrics-port", "70000"], "metrics-port: must be a TCP port"),
    (["--hiccup", "5s"], "hiccup: expected DURATION@OFFSET"),
    (["--hiccup", "5x@30s"], "hiccup: not a duration: '5x'"),
    (["--hiccup", "0s@30s"], "hiccup: the stall must last more than 0s"),
    (["--hiccup", "5s@30s", "--duration", "20s"], "hiccup: starts at +30s, after the demo ends"),
    (["--workdir", __file__], "workdir: "),
]


@pytest.mark.parametrize(("args", "message"), BAD, ids=[" ".join(a) for a, _ in BAD])
def test_bad_flag_is_one_line_naming_it(
    args: list[str],
    message: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def started(*_: object) -> int:
        raise AssertionError("the demo started despite bad input")

    monkeypatch.setattr(monitor.demo, "_run_pipeline", started)
    assert main(["demo", *args]) == 2
    err = capsys.readouterr().err
    assert err.splitlines() == [err.strip()], err
    assert err.startswith(f"nines demo: error: {message}"), err


def test_busy_metrics_port_is_reported_before_starting(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(monitor.demo, "_run_pipeline", lambda *_: 0)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        assert main(["demo", "--metrics-port", str(port)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"nines demo: error: metrics-port: cannot listen on 127.0.0.1:{port}")


def test_good_flags_pass_validation(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = []
    monkeypatch.setattr(
        monitor.demo, "_run_pipeline", lambda args, opts, workdir: seen.append(opts)
    )
    argv = ["demo", "--rate", "6000/m", "--duration", "1m", "--hiccup", "5s@30s", "--window", "5m"]
    assert main([*argv, "--metrics-port", "0"]) == 0
    (opts,) = seen
    assert (opts.rate, opts.duration_s, opts.window_s) == (100.0, 60.0, 300.0)
    assert (opts.hiccup.duration_s, opts.hiccup.at_s) == (5.0, 30.0)
