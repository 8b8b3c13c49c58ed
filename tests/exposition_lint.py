"""``promtool check metrics`` on a /metrics body: the findings of Prometheus' own linter."""

from __future__ import annotations

import subprocess

from real_components import require_tool


def promtool_findings(body: bytes) -> list[str]:
    """Each line promtool prints about the text-format ``body`` (none: it passes the lint)."""
    promtool = require_tool("promtool", "apt-get install prometheus")
    out = subprocess.run(
        [promtool, "check", "metrics"], input=body, capture_output=True, timeout=60
    )
    text = (out.stdout + out.stderr).decode()
    findings = [line for line in text.splitlines() if line.strip()]
    assert findings or out.returncode == 0, text
    return findings
