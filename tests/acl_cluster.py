"""Apache Kafka under KRaft's StandardAuthorizer, for the least-privilege tests.

The harness is the only super user (the PLAINTEXT listener's ``User:ANONYMOUS``); every client
under test comes in on the SASL_SSL listener as a SCRAM user of its own, made per test, with
exactly the ACLs the test grants it: tests never share a principal, so never undo each other.
"""

from __future__ import annotations

import secrets
import shutil
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kafkautil.acls import Acl
from testbroker.kraft import SCRAM_MECHANISM, KraftCluster

#: How long a new SCRAM user may take to authenticate (the credential reaches each broker
#: through the metadata log).
USER_READY_S = 30.0


@dataclass(frozen=True)
class Principal:
    """A SCRAM user of the cluster and the client config file (``probe:`` and ``stream:``
    ``kafka:`` sections) that logs in as it; the password is a ``file:`` reference."""

    name: str
    config: Path
    password: str

    @property
    def principal(self) -> str:
        return f"User:{self.name}"

    def probe_config(self, **settings: object) -> Path:
        """The client config with more ``probe:`` settings (e.g. ``manage_interval``)."""
        path = self.config.with_name("probe.yaml")
        extra = "".join(f"  {k}: {v}\n" for k, v in settings.items())
        path.write_text(self.config.read_text().replace("probe:\n", f"probe:\n{extra}", 1))
        return path


class AclCluster:
    """A :class:`KraftCluster` with the authorizer on, and the harness's admin on it."""

    def __init__(self, classpath: str, brokers: int) -> None:
        self.home = Path(tempfile.mkdtemp(prefix="nines-acl-"))
        self.cluster = KraftCluster(classpath, brokers, self.home, sasl=True, authorizer=True)
        self._users = 0
        self._admin: Any = None

    def start(self) -> AclCluster:
        self.cluster.start(warm_up=False)
        return self

    def stop(self) -> None:
        self.cluster.stop()
        shutil.rmtree(self.home, ignore_errors=True)

    @property
    def bootstrap(self) -> str:
        """The harness's (super user's) listener."""
        return self.cluster.bootstrap

    @property
    def sasl_bootstrap(self) -> str:
        """The listener of the principals under test."""
        return self.cluster.sasl_bootstrap

    def admin(self) -> Any:
        """The super user's admin client (one, kept: a dropped client fails its futures)."""
        from confluent_kafka.admin import AdminClient

        if self._admin is None:
            self._admin = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 0})
        return self._admin

    def user(self, prefix: str) -> Principal:
        """A new SCRAM user (never used before) and its client config; returns once it can log
        in."""
        from confluent_kafka.admin import (
            ScramCredentialInfo,
            ScramMechanism,
            UserScramCredentialUpsertion,
        )

        self._users += 1
        name = f"{prefix}-{self._users}-{secrets.token_hex(3)}"
        password = secrets.token_urlsafe(18)
        info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192)
        upsert = UserScramCredentialUpsertion(name, info, password.encode())
        self.admin().alter_user_scram_credentials([upsert])[name].result(30)
        directory = self.home / "users" / name
        directory.mkdir(parents=True)
        secret = directory / "password"
        secret.write_text(password + "\n")
        secret.chmod(0o600)
        assert self.cluster.sasl is not None
        settings = {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": SCRAM_MECHANISM,
            "sasl.username": name,
            "sasl.password": f"file:{secret}",
            "ssl.ca.location": str(self.cluster.sasl.ca),
        }
        lines = []
        for stage in ("probe", "stream"):
            lines.append(f"{stage}:\n  kafka:")
            lines += [f'    {k}: "{v}"' for k, v in settings.items()]
        config = directory / "client.yaml"
        config.write_text("\n".join(lines) + "\n")
        self._wait_login(name, password)
        return Principal(name, config, password)

    def _wait_login(self, name: str, password: str) -> None:
        from confluent_kafka.admin import AdminClient

        assert self.cluster.sasl is not None
        conf = {
            "bootstrap.servers": self.sasl_bootstrap,
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": SCRAM_MECHANISM,
            "sasl.username": name,
            "sasl.password": password,
            "ssl.ca.location": str(self.cluster.sasl.ca),
            "log_level": 0,
        }
        deadline = time.monotonic() + USER_READY_S
        while True:
            try:  # Metadata needs no ACL: it answers once the login succeeds
                client = AdminClient(conf)
                client.list_topics(timeout=3)
                return
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def grant(self, principal: Principal, acls: Iterable[Acl]) -> None:
        """ALLOW ``acls`` to ``principal`` from any host (CreateAcls, as the super user)."""
        bindings = [binding(principal.principal, a) for a in acls]
        if bindings:
            for future in self.admin().create_acls(bindings, request_timeout=30).values():
                future.result(30)

    def create_topic(self, name: str, partitions: int, replication: int = 1) -> None:
        self.cluster.create_topic(name, partitions, replication)


def binding(principal: str, acl: Acl) -> Any:
    """The confluent-kafka ``AclBinding`` of one row of a table of :mod:`kafkautil.acls`."""
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    return AclBinding(
        ResourceType[acl.resource],
        acl.name,
        ResourcePatternType[acl.pattern],
        principal,
        "*",
        AclOperation[acl.operation],
        AclPermissionType.ALLOW,
    )


def denials(cluster: AclCluster, principal: Principal) -> list[str]:
    """The authorizer's denials of ``principal`` in the brokers' logs (INFO lines)."""
    out = []
    for node in cluster.cluster.nodes.values():
        for path in sorted(node.home.glob("broker.log*")):
            out += [
                line
                for line in path.read_text(errors="replace").splitlines()
                if f"Principal = {principal.principal} is Denied" in line
            ]
    return out
