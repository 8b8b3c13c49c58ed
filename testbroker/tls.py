"""Throwaway TLS material made with the real openssl CLI: a CA and a server certificate for
127.0.0.1, for the Kafka engine's SASL_SSL listener and for the tests' TLS servers."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path


class TlsError(RuntimeError):
    """openssl is missing or refused; the message says which."""


@dataclass(frozen=True)
class TlsFiles:
    ca: Path
    cert: Path
    key: Path


def make_tls(directory: Path, days: int = 2) -> TlsFiles:
    """A CA and a server certificate (SAN 127.0.0.1 and localhost) signed by it, as PEM files
    (the key unencrypted PKCS#8) under ``directory``."""
    openssl = shutil.which("openssl")
    if openssl is None:
        raise TlsError("openssl not found (apt-get install openssl)")
    directory.mkdir(parents=True, exist_ok=True)
    ca_key, ca = directory / "ca.key", directory / "ca.crt"
    key, csr, cert = directory / "server.key", directory / "server.csr", directory / "server.crt"
    ext = directory / "san.ext"
    ext.write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")

    def run(*args: str) -> None:
        done = subprocess.run([openssl, *args], capture_output=True, text=True, timeout=60)
        if done.returncode != 0:
            raise TlsError(f"openssl {args[0]}: {done.stderr.strip()[-300:]}")

    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(ca_key), "-out", str(ca),
        "-days", str(days), "-subj", "/CN=nines-test-ca")  # fmt: skip
    run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(csr),
        "-subj", "/CN=127.0.0.1")  # fmt: skip
    run("x509", "-req", "-in", str(csr), "-CA", str(ca), "-CAkey", str(ca_key),
        "-CAcreateserial", "-out", str(cert), "-days", str(days), "-extfile", str(ext))  # fmt: skip
    return TlsFiles(ca, cert, key)
