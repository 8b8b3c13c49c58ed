"""The control plane's certificates, made at start in process (``trustme``) and thrown away.

A CA, the API server's serving certificate (SAN 127.0.0.1 and localhost, from
``testbroker.tls``), an admin client certificate in ``system:masters`` that every component
and the tests use, and the key pair that signs and checks service-account tokens.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from testbroker.tls import issue, make_tls


@dataclass(frozen=True)
class Pki:
    ca: Path
    ca_key: Path
    serving_cert: Path
    serving_key: Path
    admin_cert: Path
    admin_key: Path
    sa_key: Path
    sa_pub: Path


def make_pki(directory: Path, days: int = 2) -> Pki:
    """Fresh keys and certificates under ``directory`` (PEM, keys unencrypted)."""
    from cryptography.hazmat.primitives import serialization as s
    from cryptography.hazmat.primitives.asymmetric import rsa

    tls = make_tls(directory, days=days)
    admin, admin_key = issue(
        (tls.ca, tls.ca_key),
        "admin",
        "nines-admin",
        common_name="nines-admin",
        organization="system:masters",
        days=days,
    )
    sa = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    sa_key, sa_pub = directory / "sa.key", directory / "sa.pub"
    sa_key.write_bytes(sa.private_bytes(s.Encoding.PEM, s.PrivateFormat.PKCS8, s.NoEncryption()))
    sa_key.chmod(0o600)
    sa_pub.write_bytes(
        sa.public_key().public_bytes(s.Encoding.PEM, s.PublicFormat.SubjectPublicKeyInfo)
    )
    return Pki(tls.ca, tls.ca_key, tls.cert, tls.key, admin, admin_key, sa_key, sa_pub)
