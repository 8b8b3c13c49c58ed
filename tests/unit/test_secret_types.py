"""A secret is a type: every secret-bearing config field is ``SecretStr``, whatever prints it.

Generated from the models, not listed: every pydantic model of the product packages is found
by reading their source (a class whose base is ``BaseModel`` or, transitively, one of those),
and every field whose type holds ``SecretStr`` gets a generated secret. The model's ``repr``,
``str``, ``model_dump`` (Python and JSON modes), ``model_dump_json`` and JSON schema never show
it, the code that needs it still gets it back, and no one-line error of a validation failure
elsewhere in the document shows it. A field whose name looks like a secret (the redactor's own
rule, ``core.redact.SECRET_KEY``, or a ``key``) must be typed ``SecretStr``; so must a
``kafka:`` setting librdkafka marks sensitive or whose name says secret. The redactor stays the
second line (``test_secrets_never_printed``); these tests hold with it out of the picture.

The real CLI: ``nines probe`` and ``nines stream`` refusing a document with every secret
planted, each in its own process with its logging as in production.
"""

from __future__ import annotations

import ast
import functools
import importlib
import json
import os
import re
import string
import subprocess
import sys
import types
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import bcrypt
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, SecretStr, ValidationError

from core.config import ConfigError, StageConfig, _model_in, build
from core.kafka_conf import (
    CLIENT_SECRETS,
    SECRET_SETTINGS,
    is_client_secret,
    reveal,
)
from core.redact import is_secret_key

ROOT = Path(__file__).resolve().parents[2]
#: The product's packages (the wheel's, testkube aside): every model in them is checked.
PACKAGES = ("core", "runtime", "probes", "streaming", "monitor", "kafkautil", "testbroker")
#: What a model needs besides its secrets to validate (its required fields); a new model with a
#: secret and a required field fails ``test_every_secret_is_hidden_by_its_type`` until it is here.
BASE: dict[str, dict[str, Any]] = {
    "ProbeConfig": {"bootstrap": "127.0.0.1:9092"},
    "StreamConfig": {"bootstrap": "127.0.0.1:9092"},
    "PipelineConfig": {"bootstrap": "127.0.0.1:9092"},
    "TlsServerConfig": {"cert": "-----BEGIN CERTIFICATE-----"},
}
#: A field whose name says key (``key``, ``private_key``, ``key_pem``) holds key material.
KEY_NAME = re.compile(r"(^|_)key($|_pem$)|_pem_key$", re.I)
#: Values no field of a secret-bearing model takes as they are (every field is fed each).
WRONG = ([1, 2], {"a": 1}, "Zz-not-a-value", True, -5)

SECRET_CHARS = string.ascii_letters + string.digits + "@:!$&*+=~._-%/#?"
#: A distinctive head keeps a secret from occurring in a message by chance.
secrets = st.text(SECRET_CHARS, min_size=6, max_size=24).map(lambda s: "Zq9" + s)
FEW = settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@functools.cache
def models() -> tuple[type[BaseModel], ...]:
    """Every pydantic model the product packages define, found in their source and imported."""
    defs: list[tuple[str, str, set[str]]] = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ClassDef):
                    bases = {
                        b.attr if isinstance(b, ast.Attribute) else getattr(b, "id", "")
                        for b in node.bases
                    }
                    defs.append((module, node.name, bases))
    names = {"BaseModel"}
    while more := {name for _, name, bases in defs if bases & names} - names:
        names |= more
    found = []
    for module, name, bases in defs:
        if bases & names:
            cls = getattr(importlib.import_module(module), name)
            if isinstance(cls, type) and issubclass(cls, BaseModel):
                found.append(cls)
    return tuple(found)


def holds_secret(annotation: Any) -> bool:
    """Whether a field's type is, or holds, ``SecretStr`` (``SecretStr | None``, a dict's value)."""
    if annotation is SecretStr:
        return True
    return any(holds_secret(a) for a in typing.get_args(annotation))


def secret_fields(model: type[BaseModel]) -> list[str]:
    """The fields of ``model`` whose type holds ``SecretStr``, and its nested models' holders."""
    return [
        name
        for name, field in model.model_fields.items()
        if holds_secret(field.annotation)
        or (_model_in(field.annotation) is not None and secret_fields(_model_in(field.annotation)))
    ]


def looks_secret(name: str) -> bool:
    """Whether a field's name says it holds a secret: the redactor's rule, or key material."""
    return is_secret_key(name) or KEY_NAME.search(name) is not None


def untyped_secrets(found: tuple[type[BaseModel], ...]) -> list[str]:
    """``Model.field`` for every field whose name looks secret but whose type holds no secret."""
    return [
        f"{model.__name__}.{name}"
        for model in found
        for name, field in model.model_fields.items()
        if looks_secret(name) and not holds_secret(field.annotation)
    ]


def test_models_are_found() -> None:
    found = {m.__name__ for m in models()}
    assert {"ProbeConfig", "PipelineConfig", "WebConfigModel", "TlsServerConfig"} <= found
    assert {"BrokerConfig", "SlaConfig", "ExporterConfig"} <= found
    with_secrets = {m.__name__ for m in models() if secret_fields(m)}
    assert {"ProbeConfig", "StreamConfig", "WebConfigModel", "TlsServerConfig"} <= with_secrets


def test_a_field_named_like_a_secret_is_typed_secretstr() -> None:
    assert untyped_secrets(models()) == []


def test_the_name_rule_catches_a_new_untyped_secret() -> None:
    """The check above fails on a model that adds a secret-named field as plain text."""

    class New(StageConfig):
        api_token: str = ""
        client_secret: str | None = None
        key: str | None = None
        ssl_key_password: SecretStr | None = None
        rate: float = 1.0

    assert untyped_secrets((New,)) == ["New.api_token", "New.client_secret", "New.key"]


# --- every secret field, planted ----------------------------------------------------------------


def _bcrypt(secret: str) -> str:
    return bcrypt.hashpw(secret.encode()[:72], bcrypt.gensalt(4)).decode()


def _plant_value(annotation: Any, secret: str) -> list[Any]:
    """Values that carry ``secret`` for a field of this type, most direct first (a field whose
    validator wants a form, as basic-auth users want bcrypt hashes, takes a later one)."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        return [v for a in args if a is not type(None) for v in _plant_value(a, secret)]
    if origin is dict:
        value_type = args[1]
        if value_type is SecretStr:  # name -> secret (basic-auth users: name -> bcrypt hash)
            return [{"u": secret}, {"u": _bcrypt(secret)}]
        # a settings pass-through whose values may be secret: every secret setting carries it
        return [{key: secret for key in sorted(CLIENT_SECRETS)}]
    return [secret]


def planted(model: type[BaseModel], secret: str) -> dict[str, Any]:
    """A valid document of ``model`` with ``secret`` in every secret field (nested too)."""
    doc = dict(BASE.get(model.__name__, {}))
    for name in secret_fields(model):
        annotation = model.model_fields[name].annotation
        nested = _model_in(annotation)
        if nested is not None:
            sub = planted(nested, secret)
            doc[name] = [sub] if typing.get_origin(annotation) in (list, tuple) else sub
            continue
        for value in _plant_value(annotation, secret):
            try:
                model.model_validate({**doc, name: value})
            except ValidationError:
                continue
            doc[name] = value
            break
        else:
            raise AssertionError(f"{model.__name__}.{name}: no planted value validates")
    return doc


def revealed(value: Any) -> Iterator[str]:
    """Every secret a validated model holds, unwrapped (as the code that needs one does)."""
    if isinstance(value, SecretStr):
        yield value.get_secret_value()
    elif isinstance(value, BaseModel):
        for name in type(value).model_fields:
            yield from revealed(getattr(value, name))
    elif isinstance(value, dict):
        for v in value.values():
            yield from revealed(v)
    elif isinstance(value, list | tuple):
        for v in value:
            yield from revealed(v)


def shown(instance: BaseModel) -> dict[str, str]:
    """Everything that prints or dumps a model, by what it is."""
    return {
        "repr": repr(instance),
        "str": str(instance),
        "model_dump": repr(instance.model_dump()),
        "model_dump json mode": json.dumps(instance.model_dump(mode="json")),
        "model_dump_json": instance.model_dump_json(),
        "JSON schema": json.dumps(type(instance).model_json_schema()),
        "model_copy": repr(instance.model_copy()),
        "fields": repr([getattr(instance, n) for n in type(instance).model_fields]),
    }


def secret_models() -> list[type[BaseModel]]:
    return [m for m in models() if secret_fields(m)]


@FEW
@given(secrets)
def test_every_secret_is_hidden_by_its_type(secret: str) -> None:
    for model in secret_models():
        doc = planted(model, secret)
        instance = model.model_validate(doc)
        held = set(revealed(instance))
        hashes = {h for h in held if h.startswith("$2")}
        assert secret in held or hashes, f"{model.__name__}: the secret is lost, not typed"
        for what, text in shown(instance).items():
            for value in {secret, *hashes}:
                assert value not in text, f"{model.__name__} {what}: {text}"


@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(secrets)
def test_no_validation_error_shows_a_planted_secret(secret: str) -> None:
    """Every other field made wrong, and the secret field itself given a wrong type."""
    checked = 0
    for model in secret_models():
        doc = planted(model, secret)
        hashes = {h for v in doc.values() if isinstance(v, dict) for h in map(str, v.values())}
        for name in model.model_fields:
            for bad in (*WRONG, [secret]) if name in secret_fields(model) else WRONG:
                try:
                    build(model, {**doc, name: bad}, prefix="section")
                except ConfigError as exc:
                    for value in {secret} | {h for h in hashes if h.startswith("$2")}:
                        assert value not in str(exc), f"{model.__name__}.{name}: {exc}"
                    checked += 1
    assert checked > 100


# --- the kafka: pass-through ---------------------------------------------------------------------


def _kafka_models() -> list[type[BaseModel]]:
    return [m for m in secret_models() if "kafka" in m.model_fields]


#: Words that make a setting's name say secret, as a later librdkafka (or a typo) might use one.
SECRET_WORDS = "password passwd passphrase secret credential private key.pem jaas.config token"
#: Setting names that say secret.
secret_names = st.builds(
    lambda a, w, b: f"{a}{w}{b}",
    st.sampled_from(("", "sasl.", "ssl.", "sasl.oauthbearer.", "x.")),
    st.sampled_from(SECRET_WORDS.split()),
    st.sampled_from(("", ".value", ".file.contents")),
)


@FEW
@given(secrets, secret_names)
def test_kafka_secret_settings_are_typed(secret: str, generated: str) -> None:
    """librdkafka's sensitive settings, the chart's secret list and any secret-named key come
    out ``SecretStr``; what the checks and messages need (the token URL, the method) stays
    text; ``reveal`` gives librdkafka the values back."""
    keys = {*CLIENT_SECRETS, *SECRET_SETTINGS, generated, generated.upper()}
    plain = {
        "acks": "all",
        "sasl.oauthbearer.method": "default",
        "sasl.oauthbearer.token.endpoint.url": "https://issuer.example/token",
    }
    assert all(is_client_secret(k) for k in keys)
    assert not any(is_client_secret(k) for k in plain)
    for model in _kafka_models():
        config = model.model_validate(
            {**BASE[model.__name__], "kafka": {**dict.fromkeys(keys, secret), **plain}}
        )
        kafka = config.kafka
        assert all(isinstance(kafka[k], SecretStr) for k in keys), kafka
        assert {k: kafka[k] for k in plain} == plain
        assert reveal(kafka) == {**dict.fromkeys(keys, secret), **plain}
        for what, text in shown(config).items():
            assert secret not in text, f"{model.__name__} {what}"


def test_clients_and_spark_options_get_the_secret() -> None:
    """Where the value is handed over: the probe's librdkafka configs, the stream's Spark
    options (strings, typed again on the worker's side) and the consumer's settings."""
    from monitor.pipeline import PipelineConfig
    from probes.config import ProbeConfig
    from runtime.config_io import resolve_secrets
    from streaming.options import decode_options, encode_options

    secret = "Zq9-handed-over"
    kafka = {"sasl.password": secret, "sasl.username": "nines"}
    probe = build(ProbeConfig, {"bootstrap": "h:9092", "kafka": kafka})
    for client in probe.clients().values():
        assert client["sasl.password"] == secret and client["sasl.username"] == "nines"
    stream = build(PipelineConfig, {"bootstrap": "h:9092", "kafka": kafka})
    options = decode_options(encode_options(stream, None, 2))
    assert isinstance(options.kafka["sasl.password"], SecretStr)
    assert secret not in repr(options)
    assert resolve_secrets(options.kafka)["sasl.password"] == secret


# --- the real CLI -------------------------------------------------------------------------------


def run_nines(args: list[str], tmp_path: Path) -> tuple[int, str]:
    """``nines ARGS`` as its own process (its logging and hooks as in production)."""
    log = tmp_path / "nines.log"
    with open(log, "wb") as f:
        code = subprocess.run(
            [sys.executable, "-m", "monitor", *args],
            stdout=f, stderr=subprocess.STDOUT, env=dict(os.environ), timeout=60,
        ).returncode  # fmt: skip
    return code, log.read_text(errors="replace")


def test_real_cli_start_up_errors_print_no_planted_secret(tmp_path: Path) -> None:
    """Every secret field of the probe's, the stream's and the web config's models planted (by
    ``planted``), and the start-up refused: by a wrong field, by a key OpenSSL cannot load, by a
    password that is no bcrypt hash. One line, exit 2, no secret, for each."""
    from monitor.pipeline import PipelineConfig
    from probes.config import ProbeConfig
    from runtime.webconfig import WebConfigModel

    secret = "Zq9Pl4nted-" + "s3cr3t@x:y"
    probe = planted(ProbeConfig, secret)
    stream = planted(PipelineConfig, secret)
    web = planted(WebConfigModel, secret)
    hashes = {h.get_secret_value() for h in (WebConfigModel(**web).basic_auth_users or {}).values()}
    not_a_hash = {"basic_auth_users": {"u": "$2y$10$" + secret}}
    files = {
        "wrong-field.yaml": {"probe": {**probe, "rate": [1, 2]}, "stream": {**stream}},
        "stream-wrong.yaml": {"stream": {**stream, "highest": "1us"}},
        "ok.yaml": {"probe": probe},
        "web.yaml": web,
        "web-not-a-hash.yaml": not_a_hash,
    }
    for name, doc in files.items():
        (tmp_path / name).write_text(yaml.safe_dump(doc))
    p = str(tmp_path)
    runs = [
        ["probe", "--config", f"{p}/wrong-field.yaml"],
        ["stream", "--config", f"{p}/stream-wrong.yaml"],
        ["probe", "--config", f"{p}/ok.yaml", "--web-config-file", f"{p}/web.yaml",
         "--metrics-port", "0"],
        ["probe", "--config", f"{p}/ok.yaml", "--web-config-file", f"{p}/web-not-a-hash.yaml",
         "--metrics-port", "0"],
    ]  # fmt: skip
    for args in runs:
        code, text = run_nines(args, tmp_path)
        for value in {secret, *hashes}:
            assert value not in text, (args, text)
        assert code == 2, (args, text)
        assert len(text.splitlines()) == 1 and "error:" in text, (args, text)


# --- a probed system's URL -----------------------------------------------------------------------

#: A target URL's credentials, as users write them: a user and password, a token, no user.
URL_FORMS = ("amqp://probe:{s}@rabbit:5672/%2F", "nats://{s}@nats:4222", "redis://:{s}@r:6379/0")
#: Secrets a URL holds unencoded (``@``, ``:``, ``/``, ``?`` and ``#`` would be its structure).
url_secrets = st.text(string.ascii_letters + string.digits + "-._~!$&*+=", min_size=6).map(
    lambda s: "Zq9" + s
)


@FEW
@given(url_secrets, st.sampled_from(URL_FORMS))
def test_a_target_urls_credentials_are_typed(secret: str, form: str) -> None:
    """``probe.bootstrap``'s credentials live in a ``SecretStr``: the field keeps the address
    (scheme, user, host: what names the fix), the transport gets the URL back whole."""
    from probes.config import ProbeConfig

    url = form.format(s=secret)
    config = ProbeConfig.model_validate({"bootstrap": url, "echo_bootstrap": "k:9092"})
    assert config.bootstrap_url() == url
    assert config.system == {"amqp": "rabbitmq"}.get(url.split(":")[0], url.split(":")[0])
    assert "@" in config.bootstrap and config.bootstrap.split("@")[-1] == url.split("@")[-1]
    for what, text in shown(config).items():
        assert secret not in text, f"{what}: {text}"
    kafka = ProbeConfig.model_validate({"bootstrap": "k:9092"})  # nothing to hide: as given
    assert kafka.bootstrap == kafka.bootstrap_url() == "k:9092"
