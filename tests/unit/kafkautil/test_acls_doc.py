"""docs/deploy.md's ACL tables are kafkautil.acls' (the rows the least-privilege tests grant)."""

from __future__ import annotations

import re
from pathlib import Path

from kafkautil.acls import Acl, lacks, probe_acls, stream_acls

DEPLOY = Path(__file__).resolve().parents[3] / "docs" / "deploy.md"
ROW = re.compile(r"^\| ([A-Z_]+) \| ([A-Z_]+) \| (\S+) \| ([A-Z]+) \| (.+) \|$")


def documented() -> list[list[Acl]]:
    """Each table of the least-privilege section, in order."""
    text = DEPLOY.read_text()
    section = text.split("## Least privilege: the ACLs each part needs", 1)[1].split("\n## ")[0]
    tables: list[list[Acl]] = []
    for line in section.splitlines():
        if line.startswith("| operation |"):
            tables.append([])
        elif m := ROW.match(line):
            tables[-1].append(Acl(*m.groups()))
    return tables


def test_the_documented_tables_are_the_ones_granted() -> None:
    probe, managed, rebalance, fleet, stream = documented()
    t, e = "nines.probe", "nines.echoes"
    assert probe == probe_acls(t, e)
    assert probe + managed == probe_acls(t, e, manage=True)
    assert probe + managed + rebalance == probe_acls(t, e, manage=True, rebalance=True)
    assert probe + fleet == probe_acls(t, e, fleet=True)
    assert stream == stream_acls(e)


def test_only_an_authorization_failure_names_a_right() -> None:
    assert lacks("TOPIC_AUTHORIZATION_FAILED", "WRITE", "TOPIC", "t") == (
        "TOPIC_AUTHORIZATION_FAILED: the principal lacks WRITE on topic 't'"
    )
    assert lacks("_MSG_TIMED_OUT", "WRITE", "TOPIC", "t") == "_MSG_TIMED_OUT"
