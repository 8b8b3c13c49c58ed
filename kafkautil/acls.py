"""The Kafka ACLs each part of nines needs, and the one phrase that names a missing one.

One table, which docs/deploy.md shows and the least-privilege tests grant row by row
(tests/integration/test_least_privilege.py), measured under KRaft's StandardAuthorizer: what a
part never asks for is not here (no cluster Describe, no DescribeConfigs, no group Read but a
fleet's: the other consumers assign partitions and never join or commit).
"""

from __future__ import annotations

from dataclasses import dataclass

#: The consumer groups' names: ``nines-probe-<probe id>``, ``nines-stream-<pid>`` and the
#: stream's pre-flight ``nines-stream-preflight``. Neither consumer joins or commits: the group
#: is only looked up (FindCoordinator), which needs Describe on it.
PROBE_GROUP_PREFIX = "nines-probe-"
#: A probe fleet's group (``fleet_group``): its replicas join it, and commit nothing.
FLEET_GROUP_PREFIX = f"{PROBE_GROUP_PREFIX}fleet-"
STREAM_GROUP_PREFIX = "nines-stream-"
#: The one cluster resource's name in Kafka's ACLs.
CLUSTER_NAME = "kafka-cluster"


@dataclass(frozen=True, slots=True)
class Acl:
    """One ALLOW rule: ``operation`` on ``resource`` ``name``, matched as ``pattern``."""

    operation: str
    resource: str
    name: str
    pattern: str = "LITERAL"
    #: Which request needs it, for the docs' table.
    why: str = ""


def probe_acls(
    topic: str,
    echo_topic: str,
    *,
    manage: bool = False,
    rebalance: bool = False,
    fleet: bool = False,
) -> list[Acl]:
    """What ``nines probe`` needs; ``manage``: with ``--manage-topic``, ``rebalance``: with
    ``--rebalance`` too, ``fleet``: a fleet replica (``fleet_group``)."""
    rows = [
        Acl("WRITE", "TOPIC", topic, why="produce the probe messages"),
        Acl("READ", "TOPIC", topic, why="fetch them back; ListOffsets and Metadata (Describe)"),
        Acl("WRITE", "TOPIC", echo_topic, why="produce the echo records (idempotent)"),
        Acl(
            "DESCRIBE",
            "GROUP",
            PROBE_GROUP_PREFIX,
            "PREFIXED",
            why="FindCoordinator of the consumer's group (never joined, nothing committed)",
        ),
    ]
    if manage:
        rows += [
            Acl("CREATE", "TOPIC", topic, why="CreateTopics when the probe topic is missing"),
            Acl("CREATE", "TOPIC", echo_topic, why="CreateTopics when the echo topic is missing"),
            Acl("ALTER", "TOPIC", topic, why="CreatePartitions for a broker that joined"),
        ]
    if rebalance:
        rows.append(Acl("ALTER", "CLUSTER", CLUSTER_NAME, why="ElectLeaders (preferred)"))
    if fleet:
        rows.append(
            Acl(
                "READ",
                "GROUP",
                FLEET_GROUP_PREFIX,
                "PREFIXED",
                why="JoinGroup, SyncGroup, Heartbeat, LeaveGroup of the fleet's group (no commit)",
            )
        )
    return rows


def stream_acls(echo_topic: str) -> list[Acl]:
    """What ``nines stream`` needs (offsets live in Spark's checkpoint, never in Kafka)."""
    return [
        Acl("READ", "TOPIC", echo_topic, why="fetch the echo records; ListOffsets, Metadata"),
        Acl(
            "DESCRIBE",
            "GROUP",
            STREAM_GROUP_PREFIX,
            "PREFIXED",
            why="FindCoordinator, OffsetFetch of the pre-flight (never joined, nothing committed)",
        ),
    ]


def lacks(error: str, operation: str, resource: str, name: str) -> str:
    """``error``, and when it is an authorization failure the right it means is missing:
    ``TOPIC_AUTHORIZATION_FAILED: the principal lacks WRITE on topic 'nines.probe'``."""
    if not error.endswith("_AUTHORIZATION_FAILED"):
        return error
    return f"{error}: the principal lacks {operation} on {resource.lower()} {name!r}"
