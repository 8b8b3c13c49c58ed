"""Test TLS material made in process with trustme: a CA and a server certificate for 127.0.0.1
(``testbroker.tls``, which the Kafka engine's SASL_SSL listener uses too)."""

from __future__ import annotations

from pathlib import Path

from real_components import require

from testbroker.tls import TlsError, TlsFiles
from testbroker.tls import make_tls as _make_tls


def make_tls(directory: Path) -> TlsFiles:
    """A throwaway CA and a server certificate (SAN 127.0.0.1 and localhost) signed by it."""
    made: list[TlsFiles] = []
    require("trustme (pip install trustme)", lambda: made.append(_make_tls(directory)), TlsError)
    return made[0]


__all__ = ["TlsFiles", "make_tls"]
