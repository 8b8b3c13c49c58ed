"""Grafana dashboards as code (grafana-foundation-sdk)."""
