"""Alert rules Prometheus will load: the SLA's templates are parsed as Prometheus parses them.

``core.alert_template`` is held to the real ``promtool check rules``: thousands of generated
templates (random runs of template pieces, and mostly-valid nested actions) go to promtool in
one run, one rules file each, and the checker must agree with every verdict. Then the operator's
path: ``nines alerts render`` refuses a broken summary (the issue's ``{{ $value ``) in one line
naming the objective and field, and what it renders, promtool loads.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from alerts_helpers import ROOT

from core.alert_template import FUNCTIONS, template_error
from core.config import ConfigError
from monitor.alerts.promtool import check_with_promtool
from monitor.alerts.rules import render_rules
from monitor.cli import main
from runtime.config_io import load_sla

#: Pieces a generated template is made of: delimiters, trim markers, comments, variables,
#: fields, functions (known and not), literals of every kind (good and bad), keywords, noise.
PIECES = ["{{", "}}", "{{- ", " -}}", "{{/*", "*/}}", "/*", "*/", "$value", "$labels",
          "$labels.cluster", "$x", "$", ".", ".Labels", ".Value.x", "humanize",
          "humanizeDuration", "printf", "nosuch", "toUpper", "|", "(", ")", ":=", "=", ",",
          '"s"', '"\\q"', '"\\n"', "`r`", "'c'", "'\\n'", "''", "'ab'", "1", "-1", "+1", "1.5",
          ".5", "0x1F", "08", "1e400", "1_000", "0b1", "1i", "true", "nil", "if", "else", "end",
          "range", "with", "define", '"n"', "template", "block", "break", "continue", " ", "  ",
          "!", "\t", "\n", "a", "{", "}", "-", "$value.x", "len", "index", "eq", "query", "first",
          "label", "value", "title", "and", "or", "not", "é", "$é", "0x1p-2",
          "'\\u00e9'"]  # fmt: skip
#: Functions of newer Prometheus releases than promtool 2.42 (Debian 12's): accepted by the
#: checker, since the rules may go to a newer server.
NEWER_FUNCTIONS = {"toDuration", "now", "urlQueryEscape"}


def noise(r: random.Random) -> str:
    return "".join(r.choice(PIECES) + r.choice(["", " "]) for _ in range(r.randint(1, 14)))


def nested(r: random.Random, depth: int = 0) -> str:
    """Mostly valid: actions, pipelines, declarations, if/with/range with else, define, block."""
    atoms = ["$value", "$labels.topic", ".", "1", '"x"', "(humanize $value)", "$x", "nosuch", "nil",
             "true", "'c'"]  # fmt: skip

    def pipe() -> str:
        cmds = [
            r.choice(["", "humanize ", 'printf "%v" ', "toUpper ", "len ", "index ", "eq 1 "])
            + r.choice(atoms)
            for _ in range(r.randint(1, 3))
        ]
        return r.choice(["", "", "$x := ", "$y = ", "$i, $e := "]) + " | ".join(cmds)

    out = ""
    for _ in range(r.randint(1, 4)):
        k = r.random()
        if k < 0.4:
            out += "{{ " + pipe() + " }}"
        elif k < 0.6 and depth < 2:
            kw = r.choice(["if", "with", "range"])
            out += "{{" + kw + " " + pipe() + "}}" + nested(r, depth + 1)
            if r.random() < 0.4:
                branch = r.choice(["{{else}}", "{{else if " + pipe() + "}}", "{{break}}"])
                out += branch + nested(r, depth + 1)
            out += r.choice(["{{end}}", "{{end}}", "{{ end }}", ""])
        elif k < 0.7:
            out += r.choice(["{{/* c */}}", "{{- /* c */ -}}", "{{ /* c */ }}",
                             '{{template "t"}}', '{{define "d"}}{{$value}}{{end}}',
                             '{{block "b" .}}x{{end}}'])  # fmt: skip
        else:
            out += r.choice(["text ", "on {{ $labels.cluster }}", "{{$value|humanizePercentage}}",
                             "{{- $value -}}", "{{-3}}", "{{3 -}}"])  # fmt: skip
    return out


def promtool_accepts(promtool: str, templates: list[str], home: Path) -> list[bool]:
    """promtool's verdict on each template as an alert's summary, one rules file each, one run."""
    files = []
    for i, text in enumerate(templates):
        path = home / f"r{i}.yaml"
        rule = {"alert": "A", "expr": "up == 0", "annotations": {"summary": text}}
        path.write_text(json.dumps({"groups": [{"name": "g", "rules": [rule]}]}))
        files.append(str(path))
    out = subprocess.run(
        [promtool, "check", "rules", *files], capture_output=True, text=True, timeout=300
    )
    # stdout: "Checking FILE" then "  SUCCESS: ..." for each file it loads (failures: stderr)
    verdicts: dict[str, bool] = {}
    for chunk in out.stdout.split("Checking ")[1:]:
        name, _, rest = chunk.partition("\n")
        verdicts[name.strip()] = "SUCCESS" in rest.split("Checking", 1)[0]
    assert set(verdicts) == set(files), out.stdout[-2000:]
    return [verdicts[f] for f in files]


@pytest.mark.parametrize("seed", [1, 2])
def test_the_checker_agrees_with_promtool_on_generated_templates(
    promtool: str, tmp_path: Path, seed: int
) -> None:
    r = random.Random(seed)
    templates = [noise(r) for _ in range(1500)] + [nested(r) for _ in range(1500)]
    verdicts = promtool_accepts(promtool, templates, tmp_path)
    wrong = [
        (t, ok, template_error(t))
        for t, ok in zip(templates, verdicts, strict=True)
        if (template_error(t) is None) != ok
    ]
    assert not wrong, wrong[:10]
    assert 0.3 < sum(verdicts) / len(verdicts) < 0.7  # both kinds, many of each


def test_every_function_is_prometheus_own(promtool: str, tmp_path: Path) -> None:
    names = sorted(FUNCTIONS - NEWER_FUNCTIONS)
    verdicts = promtool_accepts(promtool, [f"{{{{ {f} }}}}" for f in names], tmp_path)
    assert dict(zip(names, verdicts, strict=True)) == dict.fromkeys(names, True)
    assert template_error("{{ nosuch }}") == 'function "nosuch" not defined'


SLA = """\
objectives:
  - name: orders-p99
    topic: orders
    quantile: 0.99
    threshold: 50ms
    window: 1m
    summary: {summary}
    runbook_url: {runbook}
"""


def sla_file(tmp: Path, summary: str, runbook: str = "https://runbooks/x") -> Path:
    path = tmp / "sla.yaml"
    path.write_text(SLA.format(summary=json.dumps(summary), runbook=json.dumps(runbook)))
    return path


def test_the_issue_example_is_one_line_exit_2(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "monitor", "alerts", "render", "--sla",
         str(sla_file(tmp_path, "p99 is {{ $value "))],
        capture_output=True, text=True, timeout=60, cwd=ROOT, check=False,
    )  # fmt: skip
    assert out.returncode == 2 and out.stdout == "", out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith(
        "nines alerts: error: objectives.0.summary: objective 'orders-p99': not a template "
        "Prometheus can parse (unclosed action)"
    ), lines[0]


@pytest.mark.parametrize("field", ["summary", "runbook_url"])
def test_what_renders_promtool_loads_and_what_does_not_is_refused(
    promtool: str, tmp_path: Path, field: str
) -> None:
    """Generated annotations through the CLI entry point: exit 0 and promtool loads the file,
    or exit 2 naming the field; never a file promtool refuses."""
    import contextlib
    import io

    r = random.Random(field)
    rendered = refused = 0
    for i in range(40):
        text = r.choice([noise, nested])(r)
        home = tmp_path / str(i)
        home.mkdir()
        sla = sla_file(home, text) if field == "summary" else sla_file(home, "s", text)
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(["alerts", "render", "--sla", str(sla), "--out", str(home / "rules.yaml")])
        if code == 0:
            rendered += 1
            done = subprocess.run([promtool, "check", "rules", str(home / "rules.yaml")],
                                  capture_output=True, text=True, timeout=60)  # fmt: skip
            assert done.returncode == 0, (text, done.stdout + done.stderr)
        else:
            refused += 1
            assert code == 2, err.getvalue()
            lines = err.getvalue().strip().splitlines()
            assert len(lines) == 1 and f"objectives.0.{field}:" in lines[0], lines
            assert template_error(text) is not None
    assert rendered and refused


def test_a_rule_promtool_refuses_names_its_objective(promtool: str, tmp_path: Path) -> None:
    """What the SLA cannot see (here: a rule broken after rendering), promtool's refusal is
    mapped back to the objective whose rule it is."""
    sla = load_sla(sla_file(tmp_path, "{{ $value }}"))
    rules: dict[str, Any] = render_rules(sla)
    sla_rules = next(g for g in rules["groups"] if g["name"] == "nines-sla")["rules"]
    sla_rules[0]["expr"] = "up =="
    with pytest.raises(ConfigError) as refused:
        check_with_promtool(rules, yaml.safe_dump(rules), sla, promtool)
    assert str(refused.value).startswith("objectives.0: Prometheus refuses objective 'orders-p99'")
    sla_rules[0]["expr"] = "up == 0"
    sla_rules[0]["annotations"]["summary"] = "{{ $nope }}"
    with pytest.raises(
        ConfigError, match=r'^objectives\.0\.summary: .*undefined variable "\$nope"'
    ):
        check_with_promtool(rules, yaml.safe_dump(rules), sla, promtool)
    check_with_promtool(render_rules(sla), yaml.safe_dump(render_rules(sla)), sla, promtool)


#: What Prometheus 3.x (Go 1.23+) takes and 2.x (Go 1.19-1.22) refuses, and what both refuse.
ONLY_3X = [
    "{{with $labels.a}}a{{else with $labels.b}}b{{end}}",
    "{{with $labels.a}}a{{else with $labels.b}}b{{else}}c{{end}}",
    '{{ "a b" | urlQueryEscape }}',
]
NEITHER = {
    "{{if 1}}a{{else with 2}}b{{end}}": "unexpected <with> in input",
    "{{with 1}}a{{else if 2}}b{{end}}": "unexpected <if> in input",
    "{{range $labels}}a{{else with 2}}b{{end}}": "unexpected <with> in input",
}


def test_the_checker_takes_what_prometheus_3_takes_and_refuses_what_both_refuse() -> None:
    for text in ONLY_3X:
        assert template_error(text) is None, text
    for text, why in NEITHER.items():
        assert template_error(text) == why, text


def test_where_2x_and_3x_differ_the_users_promtool_decides(promtool: str, tmp_path: Path) -> None:
    """Debian's promtool is 2.42: it refuses each template only 3.x takes, and ``nines alerts
    render`` with it on PATH refuses them in one line naming the field, exit 2."""
    version = subprocess.run([promtool, "--version"], capture_output=True, text=True).stdout
    two = "version 2." in version
    for i, text in enumerate(ONLY_3X):
        home = tmp_path / str(i)
        home.mkdir()
        out = subprocess.run(
            [sys.executable, "-m", "monitor", "alerts", "render",
             "--sla", str(sla_file(home, text))],
            capture_output=True, text=True, timeout=60, cwd=ROOT, check=False,
            env={**os.environ, "PATH": f"{Path(promtool).parent}:{os.environ['PATH']}"},
        )  # fmt: skip
        if two:
            lines = out.stderr.strip().splitlines()
            assert out.returncode == 2 and len(lines) == 1, (text, out.stderr)
            assert "objectives.0.summary: Prometheus refuses objective 'orders-p99'" in lines[0]
        else:
            assert out.returncode == 0, (text, out.stderr)


def test_without_promtool_render_says_the_rules_were_not_checked_by_it(tmp_path: Path) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    out = subprocess.run(
        [sys.executable, "-m", "monitor", "alerts", "render", "--sla",
         str(sla_file(tmp_path, "p99 is {{ $value }}"))],
        capture_output=True, text=True, timeout=60, cwd=ROOT, check=False,
        env={**os.environ, "PATH": str(empty)},
    )  # fmt: skip
    assert out.returncode == 0 and "groups:" in out.stdout, out.stderr
    lines = out.stderr.strip().splitlines()
    assert lines == [
        "nines alerts render: warning: promtool not found on PATH: the rules were checked by "
        "nines' own parser only (Prometheus 3.x templates); install your Prometheus' promtool "
        "to check them as it will"
    ], lines
