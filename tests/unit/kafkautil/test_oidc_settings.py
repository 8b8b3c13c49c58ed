"""OIDC's settings, checked before any connection: required keys, an https:// token endpoint
(http:// only to a loopback host), the keys of other mechanisms refused beside ``oidc``."""

from __future__ import annotations

import pytest

from core.config import ConfigError, build
from probes.config import ProbeConfig

GOOD = {
    "sasl.oauthbearer.client.id": "nines",
    "sasl.oauthbearer.client.secret": "env:S",
    "sasl.oauthbearer.token.endpoint.url": "https://issuer.example.com/token",
}


def probe(login: str = "oidc", **kafka: str) -> ProbeConfig:
    return build(ProbeConfig, {"bootstrap": "k:9093", "kafka_login": login, "kafka": kafka},
                 prefix="probe")  # fmt: skip


@pytest.mark.parametrize("url", [
    "https://issuer.example.com/token", "http://127.0.0.1:8080/token", "http://localhost/t",
    "http://[::1]:8080/token", "http://127.9.9.9/t",
])  # fmt: skip
def test_token_endpoints_allowed(url: str) -> None:
    config = probe(**{**GOOD, "sasl.oauthbearer.token.endpoint.url": url})
    assert config.kafka_login == "oidc"


@pytest.mark.parametrize("url", [
    "http://issuer.example.com/token", "http://10.0.0.1/token", "ftp://x/y", "issuer/token",
    "https:///token", "http://localhost.example.com/t",
])  # fmt: skip
def test_token_endpoints_refused_in_one_line(url: str) -> None:
    with pytest.raises(ConfigError, match=r"must be an https:// URL") as refused:
        probe(**{**GOOD, "sasl.oauthbearer.token.endpoint.url": url})
    assert "\n" not in str(refused.value)


@pytest.mark.parametrize("missing", list(GOOD))
def test_each_required_key_is_named(missing: str) -> None:
    given = {k: v for k, v in GOOD.items() if k != missing}
    with pytest.raises(ConfigError, match=rf"{missing}: required for OIDC"):
        probe(**given)
    # the same under kafka_login settings, when the kafka settings ask for OIDC
    with pytest.raises(ConfigError, match=rf"{missing}: required for OIDC"):
        probe("settings", **given, **{"sasl.oauthbearer.method": "OIDC"})


def test_the_jwt_bearer_grant_needs_no_secret() -> None:
    given = {k: v for k, v in GOOD.items() if k != "sasl.oauthbearer.client.secret"}
    probe(**given, **{"sasl.oauthbearer.grant.type": "urn:ietf:params:oauth:grant-type:jwt-bearer"})


@pytest.mark.parametrize(("key", "value"), [
    ("sasl.password", "env:P"), ("sasl.username", "u"), ("sasl.oauthbearer.config", "x"),
    ("security.protocol", "SASL_PLAINTEXT"), ("sasl.mechanism", "PLAIN"),
    ("sasl.oauthbearer.method", "default"),
])  # fmt: skip
def test_other_mechanisms_refused_beside_oidc(key: str, value: str) -> None:
    with pytest.raises(ConfigError, match=rf"{key}: not with kafka_login oidc") as refused:
        probe(**GOOD, **{key: value})
    assert value not in str(refused.value).replace(f"{key}:", "").split("which")[0]


def test_what_oidc_sets_may_be_said_again() -> None:
    probe(**GOOD, **{"security.protocol": "sasl_ssl", "sasl.mechanism": "OAUTHBEARER"})
