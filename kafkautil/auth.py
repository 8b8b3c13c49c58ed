"""``kafka_login`` modes as librdkafka settings: AWS MSK IAM's token callback, built where the
client is opened (the probe's process, or a Spark worker from the plain ``KafkaAuth``).

MSK IAM is SASL/OAUTHBEARER whose token is a SigV4-presigned ``kafka-cluster:Connect`` request
for ``kafka.REGION.amazonaws.com``, signed by ``aws-msk-iam-sasl-signer-python`` with the
credentials of the standard AWS chain (environment, profile, web identity). librdkafka calls
the callback for the first token and again at 80 % of the lifetime we report, which is the
token's own (15 min) or, sooner, its credentials' (a presigned URL dies with them).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from core.config import ConfigError
from core.kafka_conf import MSK_IAM_SETTINGS, KafkaAuth

log = logging.getLogger("nines.kafka.auth")

#: Where the credentials come from, said when there are none.
AWS_CHAIN = "environment, shared config/credentials profile, or web identity"


class NoCredentials(RuntimeError):
    """The AWS credential chain found nothing (the message holds no secret)."""


def msk_iam_token(region: str) -> tuple[str, float]:
    """A fresh MSK IAM token and when it expires (seconds since the epoch).

    The expiry is the token's or the credentials' (temporary ones: web identity, SSO,
    ``credential_process``), whichever comes first.
    """
    import botocore.session
    from aws_msk_iam_sasl_signer import MSKAuthTokenProvider
    from botocore.credentials import CredentialProvider

    creds = botocore.session.Session().get_credentials()
    frozen = None if creds is None else creds.get_frozen_credentials()
    if frozen is None or not frozen.access_key or not frozen.secret_key:
        raise NoCredentials(f"no AWS credentials found ({AWS_CHAIN})")

    class Given(CredentialProvider):  # type: ignore[misc]
        METHOD = "nines"

        def load(self) -> Any:
            return frozen

    token, expiry_ms = MSKAuthTokenProvider.generate_auth_token_from_credentials_provider(
        region, Given()
    )
    expiry_s = expiry_ms / 1000
    # botocore keeps a refreshable credential's end only in this attribute
    ends = getattr(creds, "_expiry_time", None)
    if ends is not None:
        expiry_s = min(expiry_s, ends.timestamp())
    return token, expiry_s


class MskIamToken:
    """confluent-kafka's ``oauth_cb`` for MSK IAM: a token per call, failures counted.

    A failure is logged in one line (never a credential) and raised, so librdkafka keeps its
    current token and tries again; :func:`token_failures` counts them.
    """

    def __init__(self, region: str) -> None:
        self.region = region

    def __call__(self, _config: str) -> tuple[str, float]:
        try:
            return msk_iam_token(self.region)
        except Exception as exc:
            global _FAILURES
            with _LOCK:
                _FAILURES += 1
            log.warning("aws-msk-iam: no token for %s: %s", self.region, _one_line(exc))
            raise


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


_LOCK = threading.Lock()
_FAILURES = 0


def auth_settings(auth: KafkaAuth) -> dict[str, Any]:
    """The librdkafka settings ``auth`` adds to a client's (none for ``settings``)."""
    if auth.mode != "aws-msk-iam":
        return {}
    assert auth.region is not None  # the config requires it
    return {**MSK_IAM_SETTINGS, "oauth_cb": MskIamToken(auth.region)}


def token_failures() -> int:
    """Token requests of this process' MSK IAM callbacks that failed."""
    return _FAILURES


def check_auth(auth: KafkaAuth, field: str) -> None:
    """At start, before any client: a token can be made, or ConfigError in one line."""
    if auth.mode != "aws-msk-iam":
        return
    assert auth.region is not None
    t0 = time.monotonic()
    try:
        msk_iam_token(auth.region)
    except NoCredentials as exc:
        raise ConfigError(f"{field}: aws-msk-iam: {exc}") from None
    except Exception as exc:  # a profile that names nothing, an unreadable token file, ...
        raise ConfigError(f"{field}: aws-msk-iam: {_one_line(exc)}") from None
    log.debug("aws-msk-iam: first token in %.3f s", time.monotonic() - t0)


__all__ = [
    "AWS_CHAIN",
    "MskIamToken",
    "NoCredentials",
    "auth_settings",
    "check_auth",
    "msk_iam_token",
    "token_failures",
]
