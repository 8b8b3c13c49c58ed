"""An AWS credential chain of the test's own: nothing from the machine, and never the network.

``aws_env`` is the environment a process gets: no AWS variable of the caller's, config and
credentials files the test names (or none), and the EC2 instance metadata lookup off (its
address is not loopback: a test never sends it a packet). ``credential_process`` writes a
profile whose credentials expire ``lifetime_s`` after each issue and logs each one issued.
"""

from __future__ import annotations

import os
import sys
import textwrap
from pathlib import Path


def aws_env(config: Path | None = None, **extra: str) -> dict[str, str]:
    """``os.environ`` without AWS settings, with ``config`` as the AWS config file."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    missing = str(Path("/nonexistent/nines-test-aws"))
    env |= {
        "AWS_CONFIG_FILE": str(config) if config else missing,
        "AWS_SHARED_CREDENTIALS_FILE": missing,
        "AWS_EC2_METADATA_DISABLED": "true",
        **extra,
    }
    return env


def credential_process(directory: Path, lifetime_s: float) -> tuple[Path, Path]:
    """An AWS config file whose default profile runs a ``credential_process`` issuing new keys
    (``AKIDNINES<n>``) that expire ``lifetime_s`` later, and the log of what it issued
    (``ACCESS_KEY EXPIRATION_EPOCH_S`` per line)."""
    directory.mkdir(parents=True, exist_ok=True)
    issued = directory / "issued.log"
    script = directory / "creds.py"
    script.write_text(
        textwrap.dedent(f"""\
        import datetime, json, secrets, time
        log = {str(issued)!r}
        n = sum(1 for _ in open(log)) if __import__("os").path.exists(log) else 0
        ends = time.time() + {lifetime_s}
        key = f"AKIDNINES{{n:08d}}"
        with open(log, "a") as f:
            f.write(f"{{key}} {{ends:.3f}}\\n")
        print(json.dumps({{"Version": 1, "AccessKeyId": key,
            "SecretAccessKey": secrets.token_urlsafe(30),
            "Expiration": datetime.datetime.fromtimestamp(ends, datetime.timezone.utc)
                .strftime("%Y-%m-%dT%H:%M:%SZ")}}))
        """)
    )
    config = directory / "config"
    config.write_text(f"[default]\ncredential_process = {sys.executable} {script}\n")
    return config, issued


__all__ = ["aws_env", "credential_process"]
