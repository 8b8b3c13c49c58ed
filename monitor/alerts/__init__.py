"""Alerts: an SLA file in, Prometheus recording and alerting rules out (``nines alerts``)."""

from monitor.alerts.rules import render_prometheus_rule, render_rules
from monitor.alerts.sla import Objective, SlaConfig, load_sla, parse_sla

__all__ = [
    "Objective",
    "SlaConfig",
    "load_sla",
    "parse_sla",
    "render_prometheus_rule",
    "render_rules",
]
