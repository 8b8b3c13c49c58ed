"""The control plane's certificates, made at start with the real openssl CLI and thrown away.

A CA, the API server's serving certificate (SAN 127.0.0.1 and localhost, from
``testbroker.tls``), an admin client certificate in ``system:masters`` that every component
and the tests use, and the key pair that signs and checks service-account tokens.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from testbroker.tls import make_tls


class PkiError(RuntimeError):
    """openssl is missing or refused; the message says which."""


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


def _openssl(*args: str) -> None:
    openssl = shutil.which("openssl")
    if openssl is None:
        raise PkiError("openssl not found (apt-get install openssl)")
    done = subprocess.run([openssl, *args], capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        raise PkiError(f"openssl {args[0]}: {done.stderr.strip()[-300:]}")


def make_pki(directory: Path, days: int = 2) -> Pki:
    """Fresh keys and certificates under ``directory`` (PEM, keys unencrypted)."""
    tls = make_tls(directory, days=days)
    ca_key = directory / "ca.key"
    admin_key, admin_csr, admin = (directory / f"admin.{x}" for x in ("key", "csr", "crt"))
    ext = directory / "client.ext"
    ext.write_text("extendedKeyUsage=clientAuth\n")
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", str(admin_key), "-out",
             str(admin_csr), "-subj", "/O=system:masters/CN=nines-admin")  # fmt: skip
    _openssl("x509", "-req", "-in", str(admin_csr), "-CA", str(tls.ca), "-CAkey", str(ca_key),
             "-CAcreateserial", "-out", str(admin), "-days", str(days),
             "-extfile", str(ext))  # fmt: skip
    sa_key, sa_pub = directory / "sa.key", directory / "sa.pub"
    _openssl(
        "genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", str(sa_key)
    )
    _openssl("pkey", "-in", str(sa_key), "-pubout", "-out", str(sa_pub))
    return Pki(tls.ca, ca_key, tls.cert, tls.key, admin, admin_key, sa_key, sa_pub)
