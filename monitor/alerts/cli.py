"""``nines alerts``: render Prometheus alerting rules from an SLA file."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import yaml

from monitor.config import ConfigError

RENDER_EXAMPLES = """examples:
  nines alerts render --sla examples/sla.yaml                      # rules file on stdout
  nines alerts render --sla examples/sla.yaml --out nines-rules.yaml
  nines alerts render --sla examples/sla.yaml --format prometheusrule \\
      --namespace monitoring --label release=prometheus --out nines-rule.yaml
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
        help="Write a Prometheus rules file or a PrometheusRule resource.",
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
        choices=("rules", "prometheusrule"),
        default="rules",
        help="A plain Prometheus rules file (default) or a monitoring.coreos.com/v1 "
        "PrometheusRule.",
    )
    render.add_argument("--name", default="nines", help="PrometheusRule name (default nines).")
    render.add_argument("--namespace", help="PrometheusRule namespace.")
    render.add_argument(
        "--label",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="Extra PrometheusRule label, e.g. release=prometheus (repeatable).",
    )
    render.set_defaults(func=run_render)


class _Dumper(yaml.SafeDumper):
    """Writes multi-line PromQL as literal blocks so the rules stay readable."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
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


def run_render(args: argparse.Namespace) -> int:
    """Load the SLA, render, and write the document."""
    from monitor.alerts.rules import render_prometheus_rule, render_rules
    from monitor.alerts.sla import load_sla

    sla = load_sla(args.sla)
    if args.format == "prometheusrule":
        document = render_prometheus_rule(
            sla, name=args.name, namespace=args.namespace, labels=_labels(args.label)
        )
    else:
        document = render_rules(sla)
    text = dump_yaml(document)
    if args.out:
        try:
            Path(args.out).write_text(text)
        except OSError as exc:
            raise ConfigError(f"--out: cannot write {args.out}: {exc.strerror}") from None
    else:
        sys.stdout.write(text)
    return 0
