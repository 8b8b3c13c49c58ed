"""An AWS credential chain of the test's own: nothing from the machine, and never the network.

``aws_env`` is the environment a process gets: no AWS variable of the caller's, config and
credentials files the test names (or none), and the EC2 instance metadata lookup off (its
address is not loopback: a test never sends it a packet). ``credential_process`` writes a
profile whose credentials expire ``lifetime_s`` after each issue and logs each one issued.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import sys
import textwrap
from pathlib import Path
from urllib.parse import parse_qsl, quote, urlsplit


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
    (``ACCESS_KEY EXPIRATION_EPOCH_S SECRET_KEY`` per line: test keys, kept to check signatures).
    The probe's three clients and the stream's ask at once: an issue is numbered under a lock,
    so no two take one key name with two secrets (a loaded run of the MSK IAM test once met
    that as a recorded signature matching neither)."""
    directory.mkdir(parents=True, exist_ok=True)
    issued = directory / "issued.log"
    script = directory / "creds.py"
    script.write_text(
        textwrap.dedent(f"""\
        import datetime, fcntl, json, secrets, time
        with open({str(issued)!r}, "a+") as f:
            fcntl.flock(f, fcntl.LOCK_EX)  # clients ask at once: one number per issue
            f.seek(0)
            n = sum(1 for _ in f)
            ends = time.time() + {lifetime_s}
            key, secret = f"AKIDNINES{{n:08d}}", secrets.token_urlsafe(30)
            f.write(f"{{key}} {{ends:.3f}} {{secret}}\\n")
        print(json.dumps({{"Version": 1, "AccessKeyId": key, "SecretAccessKey": secret,
            "Expiration": datetime.datetime.fromtimestamp(ends, datetime.timezone.utc)
                .strftime("%Y-%m-%dT%H:%M:%SZ")}}))
        """)
    )
    config = directory / "config"
    config.write_text(f"[default]\ncredential_process = {sys.executable} {script}\n")
    return config, issued


def issued_keys(log: Path) -> dict[str, tuple[float, str]]:
    """``credential_process``'s log: access key → (expiration, secret key)."""
    out = {}
    for line in log.read_text().splitlines():
        key, ends, secret = line.split()
        out[key] = (float(ends), secret)
    return out


def url_of(token: str) -> str:
    """An MSK IAM token's presigned URL (the token is its base64url, unpadded)."""
    return base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode()


def sigv4_signature(url: str, secret: str) -> str:
    """The signature a presigned GET of ``url`` must carry: AWS SigV4 query-string auth, written
    here from AWS's spec, not botocore's code (the signer adds ``User-Agent`` after signing)."""
    parts = urlsplit(url)
    query = [
        (k, v) for k, v in parse_qsl(parts.query) if k not in ("X-Amz-Signature", "User-Agent")
    ]
    enc = lambda s: quote(s, safe="-_.~")  # noqa: E731
    canonical_query = "&".join(f"{enc(k)}={enc(v)}" for k, v in sorted(query))
    canonical = "\n".join(["GET", parts.path or "/", canonical_query, f"host:{parts.hostname}\n",
                           "host", hashlib.sha256(b"").hexdigest()])  # fmt: skip
    params = dict(query)
    scope = params["X-Amz-Credential"].split("/", 1)[1]
    to_sign = "\n".join(["AWS4-HMAC-SHA256", params["X-Amz-Date"], scope,
                         hashlib.sha256(canonical.encode()).hexdigest()])  # fmt: skip
    date, region, service, _ = scope.split("/")
    key = f"AWS4{secret}".encode()
    for part in (date, region, service, "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    return hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()


__all__ = ["aws_env", "credential_process", "issued_keys", "sigv4_signature", "url_of"]
