"""Probe agents: open-loop probes that measure from the intended send time."""
