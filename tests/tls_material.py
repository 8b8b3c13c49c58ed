"""Test TLS material made with the real openssl CLI: a CA and a server certificate for 127.0.0.1
(``testbroker.tls``, which the Kafka engine's SASL_SSL listener uses too)."""

from __future__ import annotations

from pathlib import Path

from real_components import require_tool

from testbroker.tls import TlsFiles
from testbroker.tls import make_tls as _make_tls


def make_tls(directory: Path) -> TlsFiles:
    """A throwaway CA and a server certificate (SAN 127.0.0.1 and localhost) signed by it."""
    require_tool("openssl", "Debian package 'openssl'")  # skip, or fail under CI, without it
    return _make_tls(directory)


__all__ = ["TlsFiles", "make_tls"]
