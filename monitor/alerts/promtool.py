"""The rendered rules checked by the real ``promtool check rules`` when it is installed.

The SLA's own checks refuse what it can see (templates, windows, thresholds); promtool is
Prometheus' parser itself, so a rule it refuses (an expression, a template) is refused here in
one line naming the objective, before Prometheus refuses the whole file. It is the user's own
promtool that decides where Prometheus 2.x and 3.x differ (``core.alert_template`` follows 3.x).
Without promtool on PATH nothing is checked here, and ``nines alerts render`` says so in one line.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from core.config import ConfigError
from core.sla import SlaConfig

#: Seconds ``promtool check rules`` may take (it parses a few hundred rules in ~0.1 s).
PROMTOOL_TIMEOUT_S = 30.0
#: promtool's line for a refused rule: ``FILE: group "G", rule N, "NAME": WHY``.
_REFUSED = re.compile(r'group "(?P<group>[^"]*)", rule (?P<rule>\d+), "[^"]*": (?P<why>.*)')
_ANNOTATION = re.compile(r'^(annotation|label) "(?P<key>[^"]+)": (?P<why>.*)')
#: A rule annotation written from an SLA field of the same name.
_FIELDS = ("summary", "runbook_url")


#: What ``nines alerts render`` says when no promtool checked the rules.
UNCHECKED = (
    "warning: promtool not found on PATH: the rules were checked by nines' own parser only "
    "(Prometheus 3.x templates); install your Prometheus' promtool to check them as it will"
)


def check_with_promtool(
    rules: Mapping[str, Any], text: str, sla: SlaConfig, promtool: str | None = None
) -> bool:
    """Run ``promtool check rules`` on ``text`` (the rules file ``rules`` rendered); a refusal
    is a ConfigError naming the objective and the field. False when no promtool ran."""
    tool = promtool or shutil.which("promtool")
    if tool is None:
        return False
    with tempfile.TemporaryDirectory(prefix="nines-rules-") as home:
        path = Path(home) / "rules.yaml"
        path.write_text(text, encoding="utf-8")
        try:
            done = subprocess.run(
                [tool, "check", "rules", str(path)],
                capture_output=True,
                text=True,
                timeout=PROMTOOL_TIMEOUT_S,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired):
            return False  # a promtool that cannot run checks nothing; the SLA's checks hold
    if done.returncode == 0:
        return True
    output = (done.stderr + "\n" + done.stdout).replace(str(path), "rules")
    for line in output.splitlines():
        m = _REFUSED.search(line)
        if m:
            raise ConfigError(_blame(rules, sla, m["group"], int(m["rule"]), m["why"].strip()))
    first = next((ln.strip() for ln in output.splitlines() if ln.strip()), "no output")
    raise ConfigError(f"the rendered rules fail promtool check rules: {first}")


def _blame(rules: Mapping[str, Any], sla: SlaConfig, group: str, number: int, why: str) -> str:
    """The refusal as one line naming the SLA field it came from."""
    rule: Mapping[str, Any] = {}
    for g in rules.get("groups", []):
        if g.get("name") == group and 0 < number <= len(g.get("rules", [])):
            rule = g["rules"][number - 1]
    name = rule.get("alert") or rule.get("record") or "?"
    slo = rule.get("labels", {}).get("slo")
    index = next((i for i, o in enumerate(sla.objectives) if o.name == slo), None)
    m = _ANNOTATION.match(why)
    if index is None:
        field = "runbook_url" if m and m["key"] == "runbook_url" else "objectives"
    else:
        key = m["key"] if m and m["key"] in _FIELDS else None
        field = f"objectives.{index}" + (f".{key}" if key else "")
        name = f"objective {slo!r}, rule {name}"
    return f"{field}: Prometheus refuses {name}: {why}"


__all__ = ["PROMTOOL_TIMEOUT_S", "UNCHECKED", "check_with_promtool"]
