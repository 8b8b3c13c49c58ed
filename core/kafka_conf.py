"""librdkafka settings that nines' correctness rests on: pinned, and an override refused.

The ``kafka:`` pass-through is the user's for tuning (``acks``, ``linger.ms``,
``fetch.wait.max.ms``, security, ...). A few settings are not tuning: the stream source's offsets
are Spark's checkpoint's, its data-loss count needs ``auto.offset.reset: earliest``, and so on.
Those are listed here, once, and a ``kafka:`` key that would change one is refused in one line
(docs/configuration.md lists them). Setting a pinned key to the value nines uses is allowed.
"""

from __future__ import annotations

import functools
import ipaddress
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, PlainValidator, SecretStr, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError

from core.config import StageConfig
from core.settings import setting


@dataclass(frozen=True)
class Pin:
    """A pinned librdkafka setting: the value nines uses (None: derived from another field)."""

    value: str | None
    why: str


#: librdkafka spellings of a boolean.
_TRUE, _FALSE = {"true", "t", "1"}, {"false", "f", "0"}

#: The stream job's echo consumer (streaming/consume.py).
STREAM_PINNED: dict[str, Pin] = {
    "bootstrap.servers": Pin(None, "set it with stream.bootstrap"),
    "enable.auto.commit": Pin(
        "false", "Spark's checkpoint owns the offsets; a commit would replay or skip batches"
    ),
    "auto.offset.reset": Pin(
        "earliest",
        "an offset removed by retention restarts at the oldest one, and the gap is counted as "
        "nines_data_loss_offsets_total",
    ),
    "isolation.level": Pin(
        "read_committed",
        "librdkafka's default; the batch end offsets and the data-loss count are built and "
        "tested on it, and echo producers are never transactional",
    ),
    "enable.partition.eof": Pin("true", "the reader knows it reached a batch's end by it"),
}

#: The probe's producer, consumer and echo producer (probes/config.py ``clients``).
PROBE_PINNED: dict[str, Pin] = {
    "bootstrap.servers": Pin(None, "set it with probe.bootstrap and probe.echo_bootstrap"),
    "group.id": Pin(None, "the probe reads its partitions by assignment, as its own group"),
    "enable.auto.commit": Pin("false", "the probe writes nothing but its two topics"),
    "queue.buffering.max.messages": Pin(
        None, "bounded by rate and loss_timeout (probe) and echo_buffer (echoes)"
    ),
}

#: librdkafka settings that hold a secret. The Helm chart writes ``kafka:`` settings into a
#: ConfigMap, so its schema takes these only as ``env:VAR`` (from ``secretEnv``) or ``file:PATH``
#: references (a test derives that rule from this list).
SECRET_SETTINGS = (
    "sasl.password",
    "ssl.key.password",
    "ssl.keystore.password",
    "ssl.key.pem",
    "sasl.oauthbearer.client.secret",
    "sasl.oauthbearer.config",
)

#: librdkafka settings typed ``SecretStr`` in a ``kafka:`` section: those librdkafka marks
#: ``_RK_SENSITIVE`` (rdkafka_conf.c: the ones it hides in its own configuration dumps) but
#: ``ssl.key.location``, a path that messages name (the key it names becomes ``ssl.key.pem``),
#: and ``SECRET_SETTINGS`` (librdkafka does not mark its OIDC client secret);
#: ``CLIENT_SECRET_NAME`` adds any other key whose name says secret, so a setting a later
#: librdkafka adds is typed too.
CLIENT_SECRETS = frozenset(
    {
        *SECRET_SETTINGS,
        "sasl.username",
        "ssl.ca.pem",
    }
)
#: A ``kafka:`` key whose name says it holds a secret (the token endpoint's URL does not).
CLIENT_SECRET_NAME = re.compile(
    r"pass(?:word|wd|phrase)|secret|credential|private|jaas|key\.pem|token(?!\.endpoint)", re.I
)


def is_client_secret(key: object) -> bool:
    """Whether a ``kafka:`` setting's value is typed ``SecretStr`` (``CLIENT_SECRETS``)."""
    name = str(key).strip().lower()
    return name in CLIENT_SECRETS or CLIENT_SECRET_NAME.search(name) is not None


def _client_value(value: Any) -> str | SecretStr:
    """A ``kafka:`` value: text (a number or a mapping is refused, as librdkafka takes strings)."""
    if isinstance(value, str | SecretStr):
        return value
    raise PydanticCustomError("string_type", "Input should be a valid string")


def hide_secrets(settings: Mapping[str, str | SecretStr]) -> dict[str, str | SecretStr]:
    """``settings`` with every secret setting's value typed ``SecretStr``: its ``repr``, ``str``
    and every dump of the model show ``**********``."""
    return {
        k: SecretStr(v) if isinstance(v, str) and is_client_secret(k) else v
        for k, v in settings.items()
    }


def reveal(settings: Mapping[str, str | SecretStr]) -> dict[str, str]:
    """``settings`` as librdkafka takes them, every ``SecretStr`` unwrapped: called where a
    ``kafka:`` section becomes a client's configuration (``runtime.config_io.resolve_secrets``)
    or crosses to Spark's workers (``streaming.options``), and by the checks that read values."""
    return {k: v.get_secret_value() if isinstance(v, SecretStr) else v for k, v in settings.items()}


#: One ``kafka:`` value: text, a secret one typed ``SecretStr`` by ``hide_secrets``.
ClientValue = Annotated[str | SecretStr, PlainValidator(_client_value, json_schema_input_type=str)]

#: Tuning knobs, named in the refusal so the user sees what stays theirs.
TUNING = "acks, linger.ms, fetch.wait.max.ms"


def _same(value: str, pinned: str) -> bool:
    """Whether ``value`` is the pinned value as librdkafka reads it."""
    v = str(value).strip().lower()
    if pinned in ("true", "false"):
        return v in (_TRUE if pinned == "true" else _FALSE)
    return v == pinned


def check_pinned(
    settings: Mapping[str, str | SecretStr], pinned: Mapping[str, Pin]
) -> dict[str, str | SecretStr]:
    """``settings`` unchanged, or ValueError naming the first key that overrides a pinned one.

    The message names the key, the value nines uses and why; never the user's value (a
    ``kafka:`` value may be a secret).
    """
    for key, value in settings.items():
        pin = pinned.get(str(key).strip().lower())
        if pin is None or (pin.value is not None and _same(str(value), pin.value)):
            continue
        fixed = f"nines sets it to {pin.value}" if pin.value is not None else "nines sets it"
        raise ValueError(
            f"{str(key).strip()} is pinned ({fixed}: {pin.why}); "
            f"tuning settings such as {TUNING} stay yours"
        )
    return dict(settings)


def _pinned_field(pinned: Mapping[str, Pin]) -> AfterValidator:
    """The one validator of every stage's ``kafka:`` field: ``check_pinned`` against ``pinned``."""
    return AfterValidator(functools.partial(check_pinned, pinned=pinned))


#: The stream job's ``kafka:`` field: what the source relies on is not tuning; secrets typed.
StreamKafka = Annotated[
    dict[str, ClientValue], _pinned_field(STREAM_PINNED), AfterValidator(hide_secrets)
]
#: The probe's ``kafka:`` field: what the probe relies on is not tuning; secrets typed.
ProbeKafka = Annotated[
    dict[str, ClientValue], _pinned_field(PROBE_PINNED), AfterValidator(hide_secrets)
]

#: ``kafka_login`` modes: ``settings`` (the ``kafka:`` settings alone: PLAIN, SCRAM, mTLS, or
#: OIDC spelled out), ``aws-msk-iam`` (SASL/OAUTHBEARER with a token signed by the AWS SDK,
#: kafkautil.auth) or ``oidc`` (SASL/OAUTHBEARER with librdkafka's OIDC client credentials).
AuthMode = Literal["settings", "aws-msk-iam", "oidc"]
#: An AWS region name: ``eu-west-1``, ``us-gov-west-1``, ``cn-north-1``.
AWS_REGION = re.compile(r"[a-z]{2}(-[a-z]+)+-\d+")
#: What ``aws-msk-iam`` sets itself: a ``kafka:`` key of these names is refused, or must agree.
MSK_IAM_SETTINGS = {"security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER"}
#: ``kafka:`` keys of another SASL mechanism, refused beside ``aws-msk-iam``.
MSK_IAM_REFUSED = (
    "sasl.username",
    "sasl.password",
    "sasl.oauthbearer.method",
    "sasl.oauthbearer.config",
    "sasl.oauthbearer.client.id",
    "sasl.oauthbearer.client.secret",
    "sasl.oauthbearer.token.endpoint.url",
)


#: What ``oidc`` sets itself: librdkafka fetches and refreshes the token from the issuer.
OIDC_SETTINGS = {
    "security.protocol": "SASL_SSL",
    "sasl.mechanism": "OAUTHBEARER",
    "sasl.oauthbearer.method": "oidc",
}
#: ``kafka:`` keys of another SASL mechanism, refused beside ``oidc``.
OIDC_REFUSED = ("sasl.username", "sasl.password", "sasl.oauthbearer.config")
#: Each mode's fixed settings and refused keys (``settings``: none).
MODE_SETTINGS = {"aws-msk-iam": MSK_IAM_SETTINGS, "oidc": OIDC_SETTINGS}
MODE_REFUSED = {"aws-msk-iam": MSK_IAM_REFUSED, "oidc": OIDC_REFUSED}
#: What librdkafka's OIDC needs; the secret too with the (default) client credentials grant.
OIDC_REQUIRED = ("sasl.oauthbearer.client.id", "sasl.oauthbearer.token.endpoint.url")
OIDC_SECRET = "sasl.oauthbearer.client.secret"
OIDC_TOKEN_URL = "sasl.oauthbearer.token.endpoint.url"
CLIENT_CREDENTIALS = "client_credentials"


def oidc_in_use(mode: str, settings: Mapping[str, str]) -> bool:
    """Whether the clients get their token from an OIDC issuer: ``kafka_login: oidc``, or the
    ``kafka:`` settings ask librdkafka for it (``sasl.oauthbearer.method: oidc``)."""
    method = {str(k).strip().lower(): str(v) for k, v in settings.items()}.get(
        "sasl.oauthbearer.method", ""
    )
    return mode == "oidc" or method.strip().lower() == "oidc"


def is_loopback(host: str) -> bool:
    """``localhost``, 127.0.0.0/8 or ::1: a token proxy on this host (or pod)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_token_url(url: str) -> str:
    """The token endpoint: https://, or http:// to a loopback host only; ValueError else.

    The client secret and the tokens cross it: in clear text only within the host."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url.strip())
        host = parts.hostname or ""
    except ValueError:
        raise ValueError(f"{OIDC_TOKEN_URL}: not a URL") from None
    if parts.scheme.lower() == "https" and host:
        return url
    if parts.scheme.lower() == "http" and host and is_loopback(host):
        return url
    raise ValueError(
        f"{OIDC_TOKEN_URL}: must be an https:// URL (the client secret and the tokens cross "
        "it); http:// only to a loopback host (a token proxy beside the client)"
    )


def check_oidc(settings: Mapping[str, str]) -> None:
    """OIDC's ``kafka:`` keys present and its token endpoint allowed; ValueError naming a key."""
    given = {str(k).strip().lower(): str(v) for k, v in settings.items()}
    grant = given.get("sasl.oauthbearer.grant.type", CLIENT_CREDENTIALS).strip()
    wanted = [*OIDC_REQUIRED, *([OIDC_SECRET] if grant == CLIENT_CREDENTIALS else [])]
    for key in wanted:
        if not given.get(key, "").strip():
            raise ValueError(f"{key}: required for OIDC (sasl.oauthbearer.method oidc)")
    check_token_url(given[OIDC_TOKEN_URL])


@dataclass(frozen=True)
class KafkaAuth:
    """A stage's ``kafka_login`` and ``aws_region``: plain data, pickled to Spark's workers,
    where ``kafkautil.auth`` builds the client settings (a token callback) from it."""

    mode: AuthMode = "settings"
    region: str | None = None


class KafkaAuthConfig(StageConfig):
    """``kafka_login`` and ``aws_region``: one home for the probe's and the stream's."""

    kafka_login: AuthMode = setting(
        "settings",
        choices=True,
        help="settings: as the kafka settings say (PLAIN, SCRAM, mTLS); aws-msk-iam: "
        "SASL/OAUTHBEARER with a token signed from the AWS credential chain; oidc: "
        "SASL/OAUTHBEARER with a token from an OIDC issuer (client credentials in the kafka "
        "settings)",
    )
    aws_region: str | None = setting(
        None,
        validate_default=True,
        help="aws-msk-iam: the cluster's AWS region (e.g. eu-west-1)",
    )

    @field_validator("aws_region")
    @classmethod
    def _aws_region(cls, v: str | None, info: ValidationInfo) -> str | None:
        msk = info.data.get("kafka_login") == "aws-msk-iam"
        if v is None and msk:
            raise ValueError("required with kafka_login aws-msk-iam (e.g. eu-west-1)")
        if v is not None and not msk:
            raise ValueError("only with kafka_login aws-msk-iam")
        if v is not None and not AWS_REGION.fullmatch(v):
            raise ValueError("must be an AWS region name, e.g. eu-west-1")
        return v

    @field_validator("kafka", check_fields=False)
    @classmethod
    def _login_kafka(
        cls, v: Mapping[str, str | SecretStr], info: ValidationInfo
    ) -> Mapping[str, str | SecretStr]:
        mode = str(info.data.get("kafka_login", "settings"))
        fixed, refused = MODE_SETTINGS.get(mode, {}), MODE_REFUSED.get(mode, ())
        plain = reveal(v)
        for key, value in plain.items():
            name = str(key).strip().lower()
            wanted = fixed.get(name)
            if name in refused or (
                wanted is not None and str(value).strip().lower() != wanted.lower()
            ):
                what = (
                    f"sets it to {wanted}"
                    if wanted
                    else "signs its own token"
                    if mode == "aws-msk-iam"
                    else "takes its token from the OIDC issuer"
                )
                raise ValueError(f"{str(key).strip()}: not with kafka_login {mode}, which {what}")
        if oidc_in_use(mode, plain):
            check_oidc(plain)
        return v

    @property
    def auth(self) -> KafkaAuth:
        """The Kafka clients' authentication mode, as plain data."""
        return KafkaAuth(self.kafka_login, self.aws_region)


__all__ = [
    "AWS_REGION",
    "CLIENT_SECRETS",
    "CLIENT_SECRET_NAME",
    "MSK_IAM_REFUSED",
    "MSK_IAM_SETTINGS",
    "OIDC_SETTINGS",
    "PROBE_PINNED",
    "SECRET_SETTINGS",
    "STREAM_PINNED",
    "TUNING",
    "AuthMode",
    "ClientValue",
    "KafkaAuth",
    "KafkaAuthConfig",
    "Pin",
    "ProbeKafka",
    "StreamKafka",
    "check_oidc",
    "check_pinned",
    "check_token_url",
    "hide_secrets",
    "is_client_secret",
    "oidc_in_use",
    "reveal",
]
