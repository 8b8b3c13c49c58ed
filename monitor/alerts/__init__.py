"""Alerts: an SLA file in, Prometheus recording and alerting rules out (``nines alerts``)."""

from core.sla import Objective, SlaConfig, parse_sla
from monitor.alerts.rules import render_prometheus_rule, render_rules
from runtime.config_io import load_sla

__all__ = [
    "Objective",
    "SlaConfig",
    "load_sla",
    "parse_sla",
    "render_prometheus_rule",
    "render_rules",
]
