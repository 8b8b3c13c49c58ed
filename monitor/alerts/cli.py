"""``nines alerts``: render Prometheus alerting rules from an SLA file."""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from core.config import ConfigError

FORMATS = ("rules", "prometheusrule", "helm-values")

RENDER_EXAMPLES = """examples:
  nines alerts render --sla examples/sla.yaml                      # rules file on stdout
  nines alerts render --sla examples/sla.yaml --out nines-rules.yaml
  nines alerts render --sla examples/sla.yaml --format prometheusrule \\
      --namespace monitoring --label release=prometheus --out nines-rule.yaml
  # your SLA in the Helm chart (prometheusRule.enabled + .groups), no chart edits:
  nines alerts render --sla my-sla.yaml --format helm-values \\
      --label release=prometheus > sla-values.yaml
  helm install nines helm/nines -n monitoring -f sla-values.yaml
"""


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``alerts render``."""
    p = sub.add_parser(
        "alerts",
        help="Render Prometheus alerting rules from an SLA file.",
        description="Render Prometheus alerting rules from an SLA file (see docs/alerts.md).",
        epilog=RENDER_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    actions = p.add_subparsers(dest="alerts_command", metavar="ACTION", required=True)
    render = actions.add_parser(
        "render",
        help="Write a Prometheus rules file, a PrometheusRule resource or Helm values.",
        description="Render the SLA's alerting and recording rules; they read only the metrics "
        "in docs/metrics.md and never average quantiles. A bad SLA file exits 2 with one line "
        "naming the field.",
        epilog=RENDER_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    render.add_argument("--sla", required=True, metavar="FILE", help="SLA YAML file.")
    render.add_argument("--out", metavar="FILE", help="Write here instead of stdout.")
    render.add_argument(
        "--format",
        choices=FORMATS,
        default="rules",
        help="rules: a plain Prometheus rules file (default); prometheusrule: a "
        "monitoring.coreos.com/v1 PrometheusRule; helm-values: a values file for helm/nines "
        "(prometheusRule.enabled: true and prometheusRule.groups, the same groups as rules).",
    )
    render.add_argument(
        "--name", default="nines", help="PrometheusRule name (default nines; prometheusrule only)."
    )
    render.add_argument("--namespace", help="PrometheusRule namespace (prometheusrule only).")
    render.add_argument(
        "--label",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="Extra PrometheusRule label, e.g. release=prometheus (repeatable; with helm-values "
        "it becomes prometheusRule.labels).",
    )
    render.set_defaults(func=run_render)


HELM_VALUES_HEADER = (
    "# Values for the helm/nines chart: a PrometheusRule with these groups, rendered from an SLA\n"
    "# file by `nines alerts render --format helm-values`. Use: helm install ... -f THIS_FILE\n"
)

# Plain scalars that Go YAML (Helm's values, kubectl: go-yaml v2, YAML 1.1 rules) reads as a
# number, bool, null or timestamp, but PyYAML would write unquoted: an objective named `1e3` or
# `y` must stay a string label after Helm's toYaml.
_GO_NUMBER = re.compile(
    r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?"
    r"|[-+]?(0[xX][0-9a-fA-F]+|0[bB][01]+|0[oO]?[0-7]+|[0-9]+)"
    r"|[-+]?\.(inf|Inf|INF)|\.(nan|NaN|NAN)"
    r"|[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}([Tt ].*)?"
)
_GO_WORDS = {"y", "n", "yes", "no", "on", "off", "true", "false", "null", "~", ""}


def _go_reads_as_non_string(value: str) -> bool:
    """Would Go YAML resolve this plain scalar to something other than a string?"""
    return value.lower() in _GO_WORDS or bool(_GO_NUMBER.fullmatch(value.replace("_", "")))


class _Dumper(yaml.SafeDumper):
    """Writes multi-line PromQL as literal blocks so the rules stay readable."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    if "\n" in value:
        style: str | None = "|"
    elif _go_reads_as_non_string(value):
        style = "'"
    else:
        style = None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def dump_yaml(document: Any) -> str:
    """YAML in the order the rules were built, PromQL as literal blocks."""
    return yaml.dump(document, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=10_000)


def _labels(pairs: list[str]) -> dict[str, str]:
    """KEY=VALUE flags as a mapping."""
    labels = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ConfigError(f"--label: expected KEY=VALUE (got {pair!r})")
        labels[key] = value
    return labels


def render_helm_values(
    rules: Mapping[str, Any], labels: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """Values for helm/nines that deploy ``rules`` (a rules file) as the chart's PrometheusRule.

    The chart writes ``prometheusRule.groups`` with ``toYaml``: values are data, never
    templates, so alert templates such as ``{{ $value }}`` reach Prometheus verbatim.
    """
    rule: dict[str, Any] = {"enabled": True}
    if labels:
        rule["labels"] = dict(labels)
    rule["groups"] = list(rules["groups"])
    return {"prometheusRule": rule}


def run_render(args: argparse.Namespace) -> int:
    """Load the SLA, render, and write the document."""
    from monitor.alerts.promtool import UNCHECKED, check_with_promtool
    from monitor.alerts.rules import render_prometheus_rule, render_rules
    from runtime.config_io import load_sla

    sla = load_sla(args.sla)
    labels = _labels(args.label)
    rules = render_rules(sla)
    if not check_with_promtool(rules, dump_yaml(rules), sla):  # Prometheus' own parser
        print(f"nines alerts render: {UNCHECKED}", file=sys.stderr)
    if args.format == "prometheusrule":
        text = dump_yaml(
            render_prometheus_rule(sla, name=args.name, namespace=args.namespace, labels=labels)
        )
    elif args.format == "helm-values":
        text = HELM_VALUES_HEADER + dump_yaml(render_helm_values(render_rules(sla), labels))
    else:
        text = dump_yaml(render_rules(sla))
    if args.out:
        try:
            Path(args.out).write_text(text)
        except OSError as exc:
            raise ConfigError(f"--out: cannot write {args.out}: {exc.strerror}") from None
    else:
        sys.stdout.write(text)
    return 0
