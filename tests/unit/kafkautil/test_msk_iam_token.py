"""AWS MSK IAM tokens from the signer, read back as AWS would: a SigV4-presigned
``kafka-cluster:Connect`` request for ``kafka.REGION.amazonaws.com``, its signature recomputed
here from the secret key by an implementation of our own (AWS's SigV4 spec), not botocore's."""

from __future__ import annotations

import datetime
import os
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import pytest
from aws_env import aws_env, credential_process, issued_keys, sigv4_signature, url_of

from kafkautil.auth import check_auth, msk_iam_token

ROOT = Path(__file__).resolve().parents[3]
KEY_ID, SECRET = "AKIDNINESSTATIC01", "nines/static+test/secret0123456789abcdefgh"


def use_env(monkeypatch: pytest.MonkeyPatch, env: dict[str, str]) -> None:
    for k in list(os.environ):
        if k.startswith("AWS_"):
            monkeypatch.delenv(k)
    for k, v in env.items():
        if k.startswith("AWS_"):
            monkeypatch.setenv(k, v)


@pytest.mark.parametrize("region", ["eu-west-1", "us-gov-west-1"])
def test_a_token_is_a_presigned_connect_request_for_the_regions_msk(
    monkeypatch: pytest.MonkeyPatch, region: str
) -> None:
    use_env(monkeypatch, aws_env(AWS_ACCESS_KEY_ID=KEY_ID, AWS_SECRET_ACCESS_KEY=SECRET))
    before = int(time.time())
    token, expiry_s = msk_iam_token(region)
    url = url_of(token)
    parts = urlsplit(url)
    params = dict(parse_qsl(parts.query))
    assert (parts.scheme, parts.hostname, parts.path) == (
        "https",
        f"kafka.{region}.amazonaws.com",
        "/",
    )
    assert params["Action"] == "kafka-cluster:Connect"
    assert params["X-Amz-Algorithm"] == "AWS4-HMAC-SHA256"
    assert params["X-Amz-SignedHeaders"] == "host"
    signed = datetime.datetime.strptime(params["X-Amz-Date"], "%Y%m%dT%H%M%SZ")
    signed_s = signed.replace(tzinfo=datetime.UTC).timestamp()
    assert before - 1 <= signed_s <= time.time()
    day = signed.strftime("%Y%m%d")
    assert params["X-Amz-Credential"] == f"{KEY_ID}/{day}/{region}/kafka-cluster/aws4_request"
    assert params["X-Amz-Expires"] == "900" and expiry_s == signed_s + 900
    assert params["X-Amz-Signature"] == sigv4_signature(url, SECRET)
    assert params["X-Amz-Signature"] != sigv4_signature(url, SECRET + "x")
    assert SECRET not in url


def test_session_credentials_are_signed_with_their_token(monkeypatch: pytest.MonkeyPatch) -> None:
    use_env(monkeypatch, aws_env(AWS_ACCESS_KEY_ID=KEY_ID, AWS_SECRET_ACCESS_KEY=SECRET,
                                 AWS_SESSION_TOKEN="nines-session-token"))  # fmt: skip
    url = url_of(msk_iam_token("eu-west-1")[0])
    params = dict(parse_qsl(urlsplit(url).query))
    assert params["X-Amz-Security-Token"] == "nines-session-token"
    assert params["X-Amz-Signature"] == sigv4_signature(url, SECRET)


def test_the_expiry_is_the_credentials_when_they_end_first(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    config, issued = credential_process(tmp_path, lifetime_s=120)
    use_env(monkeypatch, aws_env(config))
    token, expiry_s = msk_iam_token("eu-west-1")
    url = url_of(token)
    key = dict(parse_qsl(urlsplit(url).query))["X-Amz-Credential"].split("/")[0]
    ends, secret = issued_keys(issued)[key]  # botocore may have asked more than once
    assert sigv4_signature(url, secret) == dict(parse_qsl(urlsplit(url).query))["X-Amz-Signature"]
    assert ends - 1 <= expiry_s <= ends  # Expiration is whole seconds


def test_no_credentials_is_one_line_at_start_and_exit_2(tmp_path: Path) -> None:
    config = tmp_path / "empty-config"
    config.write_text("[default]\nregion = eu-west-1\n")
    argvs = [
        ["probe", "--bootstrap", "127.0.0.1:9", "--metrics-port", "0"],
        ["stream", "--bootstrap", "127.0.0.1:9", "--metrics-port", "0"],
    ]
    for argv in argvs:
        run = subprocess.run(
            [sys.executable, "-m", "monitor", *argv, "--kafka-login", "aws-msk-iam",
             "--aws-region", "eu-west-1"],
            capture_output=True, text=True, timeout=60, cwd=ROOT, env=aws_env(config),
        )  # fmt: skip
        assert run.returncode == 2, run.stderr[-2000:]
        assert run.stderr.splitlines() == [
            f"nines {argv[0]}: error: {argv[0]}.kafka_login: aws-msk-iam: no AWS credentials "
            "found (environment, shared config/credentials profile, or web identity)"
        ]


def test_check_auth_passes_with_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    from core.kafka_conf import KafkaAuth

    use_env(monkeypatch, aws_env(AWS_ACCESS_KEY_ID=KEY_ID, AWS_SECRET_ACCESS_KEY=SECRET))
    check_auth(KafkaAuth("aws-msk-iam", "eu-west-1"), "probe.kafka_login")
