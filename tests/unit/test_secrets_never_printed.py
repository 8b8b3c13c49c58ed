"""A secret-looking value appears in no error output: not in validation errors, not in librdkafka's.

Each case runs the real command in a subprocess (stdout, stderr and logs all captured) and must
end in one line, exit 2, without the secret anywhere.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

SECRET = "hunter2-Zq9"
NUMERIC_SECRET = "918273645"

#: (name, YAML config text, expected start of the one error line)
CASES = [
    (
        "numeric sasl.password",
        f"probe:\n  bootstrap: 127.0.0.1:1\n  kafka:\n    sasl.password: {NUMERIC_SECRET}\n",
        "nines probe: error: probe.kafka.sasl.password: Input should be a valid string",
    ),
    (
        "kafka as a string",
        f'probe:\n  bootstrap: 127.0.0.1:1\n  kafka: "sasl.password={SECRET}"\n',
        "nines probe: error: probe.kafka: Input should be a valid dictionary",
    ),
    (
        "librdkafka rejects a value",
        f"probe:\n  bootstrap: 127.0.0.1:1\n  kafka:\n    security.protocol: {SECRET}\n",
        'nines probe: error: kafka: Invalid value "<redacted>" for configuration property '
        '"security.protocol"',
    ),
    (
        "librdkafka rejects a key",
        f"probe:\n  bootstrap: 127.0.0.1:1\n  kafka:\n    sasl.passwd: {SECRET}\n",
        'nines probe: error: kafka: No such configuration property: "sasl.passwd"',
    ),
    (
        "stream: numeric password",
        f"stream:\n  bootstrap: 127.0.0.1:1\n  kafka:\n    sasl.password: {NUMERIC_SECRET}\n",
        "nines stream: error: stream.kafka.sasl.password: Input should be a valid string",
    ),
]


@pytest.mark.parametrize(("name", "config", "expected"), CASES, ids=[c[0] for c in CASES])
def test_no_secret_in_any_output(name: str, config: str, expected: str, tmp_path: Path) -> None:
    path = tmp_path / "nines.yaml"
    path.write_text(config)
    command = "stream" if config.startswith("stream") else "probe"
    out = subprocess.run(
        [sys.executable, "-m", "monitor", command, "--config", str(path)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    everything = out.stdout + out.stderr
    assert SECRET not in everything and NUMERIC_SECRET not in everything, everything
    assert out.returncode == 2, everything
    assert out.stderr.splitlines() == [out.stderr.strip()], out.stderr
    assert out.stderr.startswith(expected), out.stderr


def test_redact_hides_quoted_values_and_keeps_keys() -> None:
    from core.config import is_secret_path, redact

    assert redact('Invalid value "s3cr3t" for configuration property "sasl.password"') == (
        'Invalid value "<redacted>" for configuration property "sasl.password"'
    )
    assert is_secret_path("probe.kafka.acks")
    assert is_secret_path("dashboards.api_token")
    assert not is_secret_path("probe.rate")
