"""librdkafka's PEM files are read once, bounded, and handed over as text (``ssl.*.pem``), so the
file librdkafka uses is the one checked; a directory of CAs and a missing file stay paths."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.redact import redact_text
from runtime.config_io import PEM_SETTINGS, resolve_secrets

PEM = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"


@pytest.mark.parametrize("location", sorted(PEM_SETTINGS))
def test_a_pem_file_becomes_its_text(location: str, tmp_path: Path) -> None:
    path = tmp_path / "x.pem"
    path.write_text(PEM)
    out = resolve_secrets({location: str(path), "security.protocol": "SSL"})
    assert out == {PEM_SETTINGS[location]: PEM, "security.protocol": "SSL"}
    path.write_text("swapped")  # what librdkafka gets was read before: the swap changes nothing
    assert out[PEM_SETTINGS[location]] == PEM


def test_the_private_key_text_is_hidden_wherever_it_is_printed(tmp_path: Path) -> None:
    body = "c2VjcmV0LWtleS1ieXRlcy0xMjM0NTY3OA=="
    key = f"-----BEGIN PRIVATE KEY-----\n{body}\n-----END PRIVATE KEY-----\n"
    (tmp_path / "k.pem").write_text(key)
    out = resolve_secrets({"ssl.key.location": str(tmp_path / "k.pem")})
    assert body not in redact_text(f"config: {out}")


def test_a_ca_directory_a_missing_file_and_a_given_pem_stay_as_they_are(tmp_path: Path) -> None:
    missing = str(tmp_path / "nope.pem")
    assert resolve_secrets({"ssl.ca.location": str(tmp_path)}) == {"ssl.ca.location": str(tmp_path)}
    assert resolve_secrets({"ssl.ca.location": missing}) == {"ssl.ca.location": missing}
    both = {"ssl.ca.location": missing, "ssl.ca.pem": PEM}  # librdkafka refuses both itself
    assert resolve_secrets(both) == both
