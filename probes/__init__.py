"""Probe agents: open-loop probes that measure from the intended send time."""

from probes.agent import ProbeAgent, run_probe
from probes.config import ProbeConfig
from probes.transport import Layout, Transport

__all__ = ["Layout", "ProbeAgent", "ProbeConfig", "Transport", "run_probe"]
