"""Test TLS material made with the real openssl CLI: a CA and a server certificate for 127.0.0.1."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from real_components import require_tool


@dataclass(frozen=True)
class TlsFiles:
    ca: Path
    cert: Path
    key: Path


def make_tls(directory: Path) -> TlsFiles:
    """A throwaway CA and a server certificate (SAN 127.0.0.1 and localhost) signed by it."""
    openssl = require_tool("openssl", "Debian package 'openssl'")
    directory.mkdir(parents=True, exist_ok=True)
    ca_key, ca = directory / "ca.key", directory / "ca.crt"
    key, csr, cert = directory / "server.key", directory / "server.csr", directory / "server.crt"
    ext = directory / "san.ext"
    ext.write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")

    def run(*args: str) -> None:
        subprocess.run([openssl, *args], check=True, capture_output=True, timeout=60)

    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(ca_key), "-out", str(ca),
        "-days", "2", "-subj", "/CN=nines-test-ca")  # fmt: skip
    run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(csr),
        "-subj", "/CN=127.0.0.1")  # fmt: skip
    run("x509", "-req", "-in", str(csr), "-CA", str(ca), "-CAkey", str(ca_key),
        "-CAcreateserial", "-out", str(cert), "-days", "2", "-extfile", str(ext))  # fmt: skip
    return TlsFiles(ca, cert, key)
