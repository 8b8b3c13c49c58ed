"""``nines alerts render`` and the SLA file: good files render, bad ones exit 2 naming the field."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from alerts_helpers import EXAMPLE_SLA, ROOT

from core.sla import BUCKET_BOUNDARIES_S
from monitor.alerts.rules import render_prometheus_rule, render_rules
from monitor.cli import main
from runtime.config_io import load_sla


def nines(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "monitor", *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )


def test_example_sla_holds_the_documented_objectives() -> None:
    sla = load_sla(EXAMPLE_SLA)
    by_name = {o.name: o for o in sla.objectives}
    p999 = by_name["e2e-p999"]
    assert (p999.quantile, p999.threshold, p999.window, p999.kind) == (0.999, 0.05, 60.0, "e2e")
    assert (p999.objective, p999.slo_period) == (0.999, 30 * 86400.0)
    assert (by_name["e2e-max"].max, by_name["e2e-max"].window) == (2.0, 60.0)
    assert (by_name["loss"].loss_ratio, by_name["loss"].window) == (0.001, 300.0)
    assert by_name["liveness"].no_echoes_for == 120.0
    assert sla.probe_hiccup_max == 0.05


def test_bucket_boundaries_are_the_exporters() -> None:
    assert BUCKET_BOUNDARIES_S[0] == 0.0001 and BUCKET_BOUNDARIES_S[-1] == 3600.0
    assert 0.05 in BUCKET_BOUNDARIES_S and len(BUCKET_BOUNDARIES_S) == 24


def test_render_to_stdout_and_out_file(promtool: str, tmp_path: Path) -> None:
    out = nines("alerts", "render", "--sla", str(EXAMPLE_SLA))
    assert out.returncode == 0, out.stderr
    assert yaml.safe_load(out.stdout) == render_rules(load_sla(EXAMPLE_SLA))
    target = tmp_path / "nines-rules.yaml"
    out = nines("alerts", "render", "--sla", str(EXAMPLE_SLA), "--out", str(target))
    assert out.returncode == 0 and out.stdout == "", out.stderr
    check = subprocess.run(
        [promtool, "check", "rules", str(target)], capture_output=True, text=True
    )
    assert check.returncode == 0, check.stdout + check.stderr


def test_render_prometheusrule() -> None:
    out = nines(
        "alerts", "render", "--sla", str(EXAMPLE_SLA), "--format", "prometheusrule",
        "--name", "nines-sla", "--namespace", "monitoring", "--label", "release=prom",
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    resource = yaml.safe_load(out.stdout)
    assert resource == render_prometheus_rule(
        load_sla(EXAMPLE_SLA), name="nines-sla", namespace="monitoring", labels={"release": "prom"}
    )
    assert resource["spec"]["groups"] == render_rules(load_sla(EXAMPLE_SLA))["groups"]


GOOD = {"name": "p", "quantile": 0.999, "threshold": "50ms", "objective": 0.999}

BAD = [
    ({"objectives": [{**GOOD, "treshold": "50ms"}]}, "objectives.0.treshold: unknown key"),
    ({"oops": 1, "objectives": [GOOD]}, "oops: unknown key"),
    ({"objectives": [{**GOOD, "threshold": "50 msec"}]}, "objectives.0.threshold: not a duration"),
    ({"objectives": [{**GOOD, "for": "soon"}]}, "objectives.0.for: not a duration"),
    ({"objectives": [{**GOOD, "quantile": 1}]}, "objectives.0.quantile: must be above 0"),
    ({"objectives": [{**GOOD, "quantile": 1.5}]}, "objectives.0.quantile: must be above 0"),
    ({"objectives": [{**GOOD, "quantile": 0.95}]}, "objectives.0.quantile: the stream job exports"),
    ({"objectives": [{**GOOD, "threshold": "40ms"}]}, "objectives.0.threshold: burn-rate alerts"),
    ({"objectives": [{**GOOD, "objective": 1}]}, "objectives.0.objective: must be above 0"),
    ({"objectives": [{**GOOD, "slo_period": "1d"}]}, "objectives.0.slo_period: must be"),
    ({"objectives": [{**GOOD, "window": "5m"}]}, "objectives.0.window: 5m is not a resolution"),
    ({"objectives": [{**GOOD, "max": "2s"}]}, "objectives.0: set exactly one of"),
    ({"objectives": [{"name": "x", "threshold": "1s"}]}, "objectives.0: set exactly one of"),
    ({"objectives": [{"name": "x", "loss_ratio": 0.1, "kind": "e2e"}]}, "objectives.0: kind"),
    ({"objectives": [{"name": "x", "max": "1s", "severity": "urgent"}]}, "objectives.0.severity:"),
    ({"objectives": [GOOD, GOOD]}, "objectives.1.name: duplicate name 'p'"),
    ({"objectives": []}, "objectives:"),
    ({"probe_hiccup_max": "0s", "objectives": [GOOD]}, "probe_hiccup_max: must be above zero"),
]  # fmt: skip


@pytest.mark.parametrize(("document", "message"), BAD, ids=[m for _, m in BAD])
def test_bad_sla_exits_2_with_one_line_naming_the_field(
    document: dict[str, object], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "sla.yaml"
    path.write_text(yaml.safe_dump(document))
    assert main(["alerts", "render", "--sla", str(path)]) == 2
    out = capsys.readouterr()
    assert out.out == ""
    lines = out.err.splitlines()
    assert len(lines) == 1, out.err
    assert lines[0].startswith(f"nines alerts: error: {message}"), lines[0]


def test_bad_sla_process_exit_status(tmp_path: Path) -> None:
    path = tmp_path / "sla.yaml"
    path.write_text(yaml.safe_dump({"objectives": [{**GOOD, "threshold": "30ms"}]}))
    out = nines("alerts", "render", "--sla", str(path))
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.startswith("nines alerts: error: objectives.0.threshold: burn-rate")
    assert len(out.stderr.splitlines()) == 1


def test_missing_sla_file_exits_2(tmp_path: Path) -> None:
    out = nines("alerts", "render", "--sla", str(tmp_path / "nope.yaml"))
    assert out.returncode == 2
    assert out.stderr.startswith("nines alerts: error: config: cannot read")


def test_render_helm_values(tmp_path: Path) -> None:
    rules = render_rules(load_sla(EXAMPLE_SLA))
    out = nines("alerts", "render", "--sla", str(EXAMPLE_SLA), "--format", "helm-values")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("# "), "a comment says what the values are and how to use them"
    assert yaml.safe_load(out.stdout) == {
        "prometheusRule": {"enabled": True, "groups": rules["groups"]}
    }
    target = tmp_path / "sla-values.yaml"
    out = nines(
        "alerts", "render", "--sla", str(EXAMPLE_SLA), "--format", "helm-values",
        "--label", "release=prometheus", "--out", str(target),
    )  # fmt: skip
    assert out.returncode == 0 and out.stdout == "", out.stderr
    values = yaml.safe_load(target.read_text())
    assert values == {
        "prometheusRule": {
            "enabled": True,
            "labels": {"release": "prometheus"},
            "groups": rules["groups"],
        }
    }
    # alert templates are plain data for Helm: written as-is, never escaped for `tpl`
    assert "{{ $value | humanizeDuration }}" in target.read_text()


def test_help_shows_the_helm_values_workflow() -> None:
    out = nines("alerts", "render", "--help")
    assert out.returncode == 0
    assert "--format helm-values" in out.stdout and "helm install" in out.stdout


# Scalars Go YAML (helm -f, kubectl) reads as numbers, bools or null when unquoted.
GO_TRAPS = ["1e3", "1E-5", "y", "N", "on", "Off", "null", "~", "", "0x1f", "0b101", "0o17", "017",
            "1_000", "-1", "+2.5", ".5", ".inf", "-.Inf", ".nan", "2001-12-14"]  # fmt: skip
PLAIN = ["0s", "5m", "e2e-p999", "p99.9", "nines-orders", "1h", "yes-please"]


@pytest.mark.parametrize("text", GO_TRAPS + PLAIN)
def test_yaml_strings_stay_strings_for_go_yaml(text: str) -> None:
    import helm_python as helm

    from monitor.alerts.cli import dump_yaml

    dumped = dump_yaml({"slo": text})
    assert helm.values_from_yaml(dumped) == {"slo": text}, dumped
    assert yaml.safe_load(dumped) == {"slo": text}
    if text in PLAIN:
        assert dumped == f"slo: {text}\n", "readable values stay unquoted"
