"""``kafka_login`` modes as librdkafka settings: AWS MSK IAM's token callback, built where the
client is opened (the probe's process, or a Spark worker from the plain ``KafkaAuth``), and
OIDC's settings, checked at start by one token request of our own.

MSK IAM is SASL/OAUTHBEARER whose token is a SigV4-presigned ``kafka-cluster:Connect`` request
for ``kafka.REGION.amazonaws.com``, signed by ``aws-msk-iam-sasl-signer-python`` with the
credentials of the standard AWS chain (environment, profile, web identity). librdkafka calls
the callback for the first token and again at 80 % of the lifetime we report, which is the
token's own (15 min) or, sooner, its credentials' (a presigned URL dies with them).
"""

from __future__ import annotations

import base64
import json
import logging
import socket
import ssl
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from typing import Any

from core.config import ConfigError
from core.kafka_conf import MSK_IAM_SETTINGS, OIDC_SETTINGS, KafkaAuth, oidc_in_use

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
            _count("aws-msk-iam")
            log.warning("aws-msk-iam: no token for %s: %s", self.region, _one_line(exc))
            raise


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


_LOCK = threading.Lock()
#: Failed token requests by login (``aws-msk-iam``, ``oidc``).
_FAILURES: dict[str, int] = {}
#: librdkafka's log facility of its OIDC token requests; each failed one logs a line there.
_OIDC_FACILITY = "OIDC"


def _count(login: str) -> None:
    with _LOCK:
        _FAILURES[login] = _FAILURES.get(login, 0) + 1


def note_client_log(level: int, facility: str, line: str) -> None:
    """Count a failed OIDC token request from librdkafka's log line (a client's ``logger``):
    every attempt logs one, while its ``error_cb`` hears only when the reason changes. The
    line says the endpoint and the issuer's answer, never the secret."""
    if facility == _OIDC_FACILITY and level >= logging.WARNING and "Failed" in line:
        _count("oidc")
        log.warning("oidc: %s", line.splitlines()[0] if line else "no token")


def auth_settings(auth: KafkaAuth) -> dict[str, Any]:
    """The librdkafka settings ``auth`` adds to a client's (none for ``settings``)."""
    if auth.mode == "oidc":
        return dict(OIDC_SETTINGS)
    if auth.mode != "aws-msk-iam":
        return {}
    assert auth.region is not None  # the config requires it
    return {**MSK_IAM_SETTINGS, "oauth_cb": MskIamToken(auth.region)}


def token_failures() -> dict[str, int]:
    """Failed token requests of this process' clients, by login (MSK IAM callbacks, librdkafka's
    OIDC requests as their ``error_cb`` heard them)."""
    with _LOCK:
        return dict(_FAILURES)


def check_auth(auth: KafkaAuth, field: str, settings: Mapping[str, Any] | None = None) -> None:
    """At start, before any client: a token can be made, or ConfigError in one line.

    ``settings`` are the client's resolved ``kafka:`` settings: with OIDC (``kafka_login:
    oidc`` or ``sasl.oauthbearer.method: oidc``) one token is asked for as librdkafka will."""
    if settings is not None and oidc_in_use(auth.mode, settings):
        _FAILURES.setdefault("oidc", 0)  # a series from the start: increase() sees the first
        check_oidc_token(settings, field.rpartition(".")[0] or field)
        return
    if auth.mode != "aws-msk-iam":
        return
    _FAILURES.setdefault("aws-msk-iam", 0)
    assert auth.region is not None
    t0 = time.monotonic()
    try:
        msk_iam_token(auth.region)
    except NoCredentials as exc:
        raise ConfigError(f"{field}: aws-msk-iam: {exc}") from None
    except Exception as exc:  # a profile that names nothing, an unreadable token file, ...
        raise ConfigError(f"{field}: aws-msk-iam: {_one_line(exc)}") from None
    log.debug("aws-msk-iam: first token in %.3f s", time.monotonic() - t0)


#: Seconds the start-up token request waits for the issuer (librdkafka's own waits 20 s).
OIDC_CHECK_TIMEOUT_S = 15.0


def _tls_context(given: Mapping[str, str]) -> ssl.SSLContext:
    """The token endpoint's trust as librdkafka's: ``https.ca.location`` (a file or a
    directory), ``https.ca.pem``, else the system's CAs."""
    location = given.get("https.ca.location", "").strip()
    pem = given.get("https.ca.pem", "").strip()
    if location and location != "probe":
        from pathlib import Path

        if Path(location).is_dir():
            return ssl.create_default_context(capath=location)
        return ssl.create_default_context(cafile=location)
    if pem:
        return ssl.create_default_context(cadata=pem)
    return ssl.create_default_context()


def check_oidc_token(settings: Mapping[str, Any], stage: str) -> None:
    """One client credentials grant against the token endpoint, as librdkafka makes it (HTTP
    Basic with the client id and secret); ConfigError in one line naming the key, never the
    secret: a refused client (wrong secret, unknown client), an endpoint that does not answer,
    an untrusted certificate, an answer without a token."""
    given = {str(k).strip().lower(): str(v) for k, v in settings.items() if isinstance(v, str)}
    url = given.get("sasl.oauthbearer.token.endpoint.url", "")
    client_id = given.get("sasl.oauthbearer.client.id", "")
    secret = given.get("sasl.oauthbearer.client.secret", "")
    grant = given.get("sasl.oauthbearer.grant.type", "client_credentials").strip()
    where = f"{stage}.kafka.sasl.oauthbearer.token.endpoint.url"
    if grant != "client_credentials":
        return  # a JWT assertion grant: librdkafka signs it; nothing to ask here
    form = {"grant_type": "client_credentials"}
    if given.get("sasl.oauthbearer.scope", "").strip():
        form["scope"] = given["sasl.oauthbearer.scope"].strip()
    basic = base64.b64encode(f"{client_id}:{secret}".encode()).decode()
    req = urllib.request.Request(
        url,
        data=urllib.parse.urlencode(form).encode(),
        headers={"Authorization": f"Basic {basic}", "Accept": "application/json",
                 "Content-Type": "application/x-www-form-urlencoded"},
        method="POST",
    )  # fmt: skip
    try:
        context = _tls_context(given)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"{stage}.kafka.https.ca.location: cannot load it ({exc})") from None
    t0 = time.monotonic()
    try:
        with urllib.request.urlopen(req, timeout=OIDC_CHECK_TIMEOUT_S, context=context) as resp:
            body = resp.read(1 << 20)
    except urllib.error.HTTPError as exc:
        why = _oauth_error(exc.read(4096))
        raise ConfigError(
            f"{stage}.kafka.sasl.oauthbearer.client.id: the issuer at {url} refused client "
            f"{client_id!r}: HTTP {exc.code}{why} (a wrong client secret or an unknown client)"
            if exc.code in (400, 401, 403)
            else f"{where}: {url} answered HTTP {exc.code}{why}"
        ) from None
    except TimeoutError:
        raise ConfigError(
            f"{where}: {url} did not answer within {OIDC_CHECK_TIMEOUT_S:.0f} s"
        ) from None
    except urllib.error.URLError as exc:
        reason = exc.reason
        if isinstance(reason, ssl.SSLCertVerificationError):
            why = f"its certificate is not trusted ({reason.verify_message}); set https.ca.location"
        elif isinstance(reason, (TimeoutError, socket.timeout)):
            why = f"no answer within {OIDC_CHECK_TIMEOUT_S:.0f} s"
        else:
            why = getattr(reason, "strerror", None) or str(reason)
        raise ConfigError(f"{where}: cannot reach {url} ({why})") from None
    except OSError as exc:
        raise ConfigError(f"{where}: cannot reach {url} ({exc.strerror or exc})") from None
    try:
        answer = json.loads(body)
        ok = isinstance(answer, dict) and isinstance(answer.get("access_token"), str)
    except ValueError:
        ok = False
    if not ok:
        raise ConfigError(f"{where}: {url} answered without an access_token (a token endpoint?)")
    log.debug("oidc: first token in %.3f s", time.monotonic() - t0)


def _oauth_error(body: bytes) -> str:
    """`` (error: description)`` from an OAuth error answer (RFC 6749 5.2), else ''."""
    try:
        answer = json.loads(body)
    except ValueError:
        return ""
    if not isinstance(answer, dict) or not isinstance(answer.get("error"), str):
        return ""
    text = str(answer.get("error_description") or "").splitlines()
    detail = f": {text[0][:200]}" if text else ""
    return f" ({answer['error'][:80]}{detail})"


__all__ = [
    "AWS_CHAIN",
    "OIDC_CHECK_TIMEOUT_S",
    "MskIamToken",
    "NoCredentials",
    "auth_settings",
    "check_auth",
    "check_oidc_token",
    "msk_iam_token",
    "note_client_log",
    "token_failures",
]
