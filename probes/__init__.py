"""Probe agents: open-loop probes that measure from the intended send time."""

from probes.agent import ProbeAgent, run_probe
from probes.config import ProbeConfig

__all__ = ["ProbeAgent", "ProbeConfig", "run_probe"]
