"""Throwaway TLS material made in process with ``trustme``: a CA and a server certificate for
127.0.0.1, for the Kafka engine's SASL_SSL listener and for the tests' TLS servers."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any


class TlsError(RuntimeError):
    """trustme is missing; the message says how to get it."""


@dataclass(frozen=True)
class TlsFiles:
    ca: Path
    cert: Path
    key: Path
    ca_key: Path


def _trustme() -> Any:
    try:
        import trustme
    except ImportError:
        raise TlsError("trustme not installed (pip install trustme)") from None
    return trustme


def _pkcs8(pem: bytes) -> bytes:
    """A PEM private key as unencrypted PKCS#8 (Kafka's PEM keystore takes nothing else)."""
    from cryptography.hazmat.primitives import serialization as s

    key = s.load_pem_private_key(pem, password=None)
    return key.private_bytes(s.Encoding.PEM, s.PrivateFormat.PKCS8, s.NoEncryption())


def _write_key(path: Path, pem: bytes) -> Path:
    path.write_bytes(_pkcs8(pem))
    path.chmod(0o600)
    return path


def issue(
    ca_files: tuple[Path, Path],
    stem: str,
    *identities: str,
    common_name: str,
    organization: str | None = None,
    days: int = 2,
) -> tuple[Path, Path]:
    """A certificate (its SANs ``identities``) and its RSA key, signed by the CA of ``ca_files``
    (its certificate and key), written beside it as ``stem.crt`` and ``stem.key`` (PEM, the key
    unencrypted PKCS#8). Its extended key usage allows both ends (server and client auth)."""
    trustme = _trustme()
    ca_cert, ca_key = ca_files
    ca = trustme.CA.from_pem(ca_cert.read_bytes(), ca_key.read_bytes())
    leaf = ca.issue_cert(
        *identities,
        common_name=common_name,
        organization_name=organization,
        not_after=datetime.now(UTC) + timedelta(days=days),
        key_type=trustme.KeyType.RSA,
    )
    cert = ca_cert.parent / f"{stem}.crt"
    cert.write_bytes(leaf.cert_chain_pems[0].bytes())
    return cert, _write_key(ca_cert.parent / f"{stem}.key", leaf.private_key_pem.bytes())


def make_tls(directory: Path, days: int = 2) -> TlsFiles:
    """A CA and a server certificate (SAN 127.0.0.1 and localhost) signed by it, as PEM files
    (the server key RSA for the ECDHE-RSA suites, keys unencrypted PKCS#8) under ``directory``."""
    trustme = _trustme()
    directory.mkdir(parents=True, exist_ok=True)
    # RSA as the leaf: a key paired with the wrong certificate is then a mismatch, not a type error
    ca = trustme.CA(key_type=trustme.KeyType.RSA, organization_unit_name="nines-test-ca")
    ca_cert = directory / "ca.crt"
    ca_cert.write_bytes(ca.cert_pem.bytes())
    ca_key = _write_key(directory / "ca.key", ca.private_key_pem.bytes())
    cert, key = issue(
        (ca_cert, ca_key), "server", "127.0.0.1", "localhost", common_name="127.0.0.1", days=days
    )
    return TlsFiles(ca_cert, cert, key, ca_key)
