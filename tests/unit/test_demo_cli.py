"""`nines demo`: every flag is checked before the broker starts; bad input: one line, exit 2."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

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
    (["--rate", "nan"], "rate: not a rate: 'nan' (must be finite"),
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
    (["--sla", "/no/such/sla.yaml"], "sla: no such file '/no/such/sla.yaml'"),
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


def test_the_demo_has_its_sla_from_any_directory(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Run outside the repository (a pip-installed user has no examples/), the demo still has
    its SLA: it ships in the package (a missing --sla file: the bad-flags table above)."""
    seen = []
    monkeypatch.setattr(
        monitor.demo, "_run_pipeline", lambda args, opts, workdir: seen.append(opts)
    )
    monkeypatch.chdir(tmp_path)
    assert main(["demo", "--duration", "1m", "--metrics-port", "0"]) == 0
    (opts,) = seen
    assert opts.sla is not None and {o.name for o in opts.sla.objectives} >= {"e2e-p999"}
    assert Path(monitor.demo.DEFAULT_SLA).is_relative_to(Path(monitor.demo.__file__).parent)


def _window(res: str, partition: str, values_us: list[int], kind: str = "e2e") -> object:
    from core.hdr import HdrLayout, SparseHistogram
    from core.windows import SeriesKey, WindowHistogram

    hist = SparseHistogram.from_values(HdrLayout(), values_us)
    return WindowHistogram(res, 0, 60_000_000, SeriesKey("c", "t", partition, kind), hist)


def test_sla_status_judges_the_worst_series_of_the_example_sla() -> None:
    from monitor.demo import DEFAULT_SLA
    from monitor.slo import live_status as sla_status
    from runtime.config_io import load_sla

    sla = load_sla(DEFAULT_SLA)  # e2e p99.9 <= 100ms per 1m, e2e max <= 2s per 10s
    fast = [5_000] * 2_000
    slow_tail = [5_000] * 1_990 + [150_000] * 10  # p99.9 = 150 ms on this partition only
    latest = {
        res: [
            _window(res, "0", fast),
            _window(res, "1", slow_tail),
            # the topic merge and other kinds never decide (rules use per-partition series)
            _window(res, "all", fast),
            _window(res, "2", [9_000_000] * 2_000, kind="publish"),
        ]
        for res in ("10s", "1m")
    }
    rows = {r["name"]: r for r in sla_status(sla, latest)}
    assert set(rows) == {"e2e-p999", "e2e-max"}  # loss and liveness are Prometheus' job
    assert rows["e2e-p999"]["state"] == "BREACH"
    assert rows["e2e-p999"]["objective"] == "e2e p99.9 <= 0.1s per 1m"  # labelled as elsewhere
    assert abs(rows["e2e-p999"]["worst"] - 0.150) < 0.150 * 1e-3
    assert rows["e2e-max"]["state"] == "ok"
    assert rows["e2e-max"]["objective"] == "e2e max <= 2s per 10s"
    assert abs(rows["e2e-max"]["worst"] - 0.150) < 0.150 * 1e-3

    calm = sla_status(
        sla, {res: [_window(res, "0", fast), _window(res, "1", fast)] for res in ("10s", "1m")}
    )
    assert {r["name"]: r["state"] for r in calm} == {"e2e-p999": "ok", "e2e-max": "ok"}


def test_sla_status_does_not_judge_a_quantile_from_too_few_samples() -> None:
    from monitor.demo import DEFAULT_SLA
    from monitor.slo import live_status as sla_status
    from runtime.config_io import load_sla

    rows = {
        r["name"]: r
        for r in sla_status(
            load_sla(DEFAULT_SLA),
            {res: [_window(res, "0", [90_000] * 500)] for res in ("10s", "1m")},
        )
    }
    assert rows["e2e-p999"]["state"] == "no data"  # 500 samples cannot carry a p99.9
    assert rows["e2e-max"]["state"] == "ok"
    assert sla_status(load_sla(DEFAULT_SLA), {})[0]["state"] == "no data"


def test_demo_writes_the_sla_rules_for_prometheus(tmp_path: object) -> None:
    from pathlib import Path

    import yaml

    from monitor.demo import DEFAULT_SLA, _write_rules
    from runtime.config_io import load_sla

    path = _write_rules(load_sla(DEFAULT_SLA), Path(str(tmp_path)))
    from monitor.alerts.rules import render_rules

    sla = load_sla(DEFAULT_SLA)
    rules = yaml.safe_load(path.read_text())
    assert rules == render_rules(sla)  # what `nines alerts render` writes
    alerts = [r for g in rules["groups"] for r in g["rules"] if "alert" in r]
    for o in sla.objectives:  # every objective of the example has its alert
        assert any(o.name in str(r) for r in alerts), o.name


def test_render_tables_attributes_a_spike_to_the_probe_or_the_broker() -> None:
    from rich.console import Console

    from monitor.terminal_tables import render_tables

    def screen(probe_pause_us: int, e2e_us: list[int]) -> str:
        latest = {
            "10s": [
                _window("10s", "0", e2e_us),
                _window("10s", "all", [probe_pause_us], kind="hiccup"),
            ]
        }
        console = Console(width=200, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
        console.print(render_tables(latest))
        return console.export_text()

    broker_stall = screen(1_000, [5_000] * 990 + [3_000_000] * 10)
    assert "p99.9" in broker_stall and "p0.999" not in broker_stall
    assert "probe pause" in broker_stall
    assert "longest own pause 1.0 ms: the tail is the broker's" in broker_stall
    probe_stall = screen(3_000_000, [5_000] * 990 + [3_000_000] * 10)
    assert "longest own pause 3000.0 ms: the probe/machine stalled" in probe_stall


def test_a_hiccup_gets_a_watermark_that_outlasts_its_stall() -> None:
    """A 3 s watermark with a 4 s stall counted the stall's backlog late (no window showed
    it on a busy machine): the default outlasts the stall, and a shorter one is refused."""
    from core.config import ConfigError
    from monitor.demo import Hiccup, _watermark

    assert _watermark(None, None) == "3s"
    assert _watermark(None, Hiccup(4.0, 25.0)) == "9s"
    assert _watermark("20s", Hiccup(4.0, 25.0)) == "20s"
    with pytest.raises(ConfigError, match=r"watermark: 3s does not outlast the 4s stall"):
        _watermark("3s", Hiccup(4.0, 25.0))


def test_the_screen_names_late_lost_and_bad_counts_once_there_are_any() -> None:
    from monitor.demo import _Losses
    from streaming.counters import StreamCounters

    losses = _Losses()
    assert losses.line() is None
    losses(0, [], StreamCounters())
    assert losses.line() is None
    key = ("c", "nines.probe")
    losses(1, [], StreamCounters(late={key: 3}, lost={key: 2}))  # type: ignore[dict-item]
    losses(2, [], StreamCounters(late={key: 1}, bad={"json": 5}))  # type: ignore[dict-item]
    line = losses.line()
    assert line is not None and line.startswith("counted: 4 late echoes")
    assert "2 lost messages" in line and "5 bad records" in line and "offsets" not in line
