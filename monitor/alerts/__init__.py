"""Alerts: an SLA file in, Prometheus recording and alerting rules out (``nines alerts``)."""

from core.sla import Objective, SlaConfig, load_sla, parse_sla
from monitor.alerts.rules import render_prometheus_rule, render_rules

__all__ = [
    "Objective",
    "SlaConfig",
    "load_sla",
    "parse_sla",
    "render_prometheus_rule",
    "render_rules",
]
