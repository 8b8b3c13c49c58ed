"""A secret reaches no output: generated secrets, placed in every input path, never printed.

Unit level (hypothesis, widely): the redactor on URLs of any scheme (tokens with no user,
passwords holding ``@`` and ``:``), scheme-less Kafka credentials, secret-named keys at any depth
of a dict's repr or JSON and in ``key=value`` text; every stage's config with a secret in its
client settings or bootstrap URL and an error elsewhere in the same section, as the CLI prints it;
log records (message, arguments, tracebacks) and warnings once ``runtime.redaction.install`` ran.

CLI level (bounded): the real command on a representative set, in-process through
``monitor.cli.main`` with file-descriptor capture, and in subprocesses for the paths that go
through a real connection attempt and the process's own logging; the secret must appear nowhere
in stdout, stderr or the log file.
"""

from __future__ import annotations

import io
import json
import logging
import os
import random
import socket
import string
import subprocess
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from bad_input_cases import WRONG_YAML, Case, outcome, section_models
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.config import ConfigError, build, section
from core.redact import REDACTED, redact_mapping, redact_text
from monitor.cli import print_error
from runtime.redaction import install

#: Characters a generated secret is made of: no whitespace or quotes (a URL or a YAML plain
#: scalar holds none unencoded), but ``@`` and ``:``, which make URL parsing ambiguous.
SECRET_CHARS = string.ascii_letters + string.digits + "@:!$&*+=~._-%/#?"
#: Secret-named settings as users write them.
SECRET_KEYS = (
    "sasl.password",
    "password",
    "ssl.key.password",
    "ssl.keystore.password",
    "token",
    "api_token",
    "sasl.oauthbearer.client.secret",
    "sasl.jaas.config",
    "ssl.key.pem",
    "basic_auth_users",
    "client_secret",
)
SCHEMES = ("nats", "redis", "rediss", "amqp", "amqps", "http", "https", "SASL_SSL", "kafka")

UNIT = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# A distinctive head keeps a secret from occurring in a message by chance ("127.0.0.1", "error").
secrets = st.text(SECRET_CHARS, min_size=6, max_size=24).map(lambda s: "Zq9" + s)
schemes = st.one_of(
    st.sampled_from(SCHEMES), st.from_regex(r"[a-z][a-z0-9+.\-]{0,7}", fullmatch=True)
)
hosts = st.sampled_from(("127.0.0.1", "kafka-0.example.com", "nats", "[::1]"))
users = st.from_regex(r"[a-z][a-z0-9_]{0,7}", fullmatch=True)


def url_with(secret: str, scheme: str, host: str, user: str | None) -> str:
    userinfo = f"{user}:{secret}" if user else secret
    return f"{scheme}://{userinfo}@{host}:4222/vhost"


@UNIT
@given(secrets, schemes, hosts, st.none() | users, st.sampled_from(("{}", "'{}'", "({})", "[{}]")))
def test_url_credentials_of_any_scheme_are_hidden(
    secret: str, scheme: str, host: str, user: str | None, frame: str
) -> None:
    url = url_with(secret, scheme, host, user)
    text = redact_text("cannot connect to " + frame.format(url) + ": refused")
    assert secret not in text
    assert host in text and scheme in text  # what names the fix stays
    if user and ":" not in secret.split("@")[0]:
        assert f"{user}:{REDACTED}@" in text


@UNIT
@given(secrets, users, hosts)
def test_kafka_bootstrap_with_credentials_is_hidden(secret: str, user: str, host: str) -> None:
    for bootstrap in (
        f"{user}:{secret}@{host}:9092",
        f"SASL_SSL://{user}:{secret}@{host}:9092,{host}:9093",
        f"{host}:9092,{user}:{secret}@{host}:9093",
    ):
        assert secret not in redact_text(f"bootstrap: cannot reach {bootstrap}")


def nested(key: str, secret: str) -> st.SearchStrategy[Any]:
    """Documents with ``key: secret`` at any depth, among other keys and lists."""
    leaf = st.fixed_dictionaries({key: st.just(secret)})
    return st.recursive(
        leaf,
        lambda inner: st.one_of(
            st.dictionaries(users, inner, min_size=1, max_size=3),
            st.lists(inner, min_size=1, max_size=2),
            st.fixed_dictionaries({"kafka": inner, "rate": st.just(5)}),
        ),
        max_leaves=4,
    )


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), secrets, st.sampled_from(SECRET_KEYS))
def test_secret_named_keys_are_hidden_at_any_depth(data: Any, secret: str, key: str) -> None:
    value: Any = secret
    if data.draw(st.booleans()):
        value = int(data.draw(st.integers(10**8, 10**12)))  # a numeric password
        secret = str(value)
    document = data.draw(nested(key, value))  # type: ignore[arg-type]
    for text in (repr(document), json.dumps(document), str(document)):
        assert secret not in redact_text(f"nines probe: error: probe (got {text})")
        assert secret not in redact_text(f"settings: {text}")
    assert secret not in repr(redact_mapping(document))
    assert secret not in redact_text(f"{key}={secret} acks=all")
    jaas = f'PlainLoginModule required username="u" password="{secret}";'
    assert secret not in redact_text(jaas)


def _error_documents(secret: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """Sections with the secret where secrets live and one wrong value elsewhere."""
    wrong = [yaml.safe_load(v) for v in WRONG_YAML.values()]
    for name, model in section_models().items():
        carriers: list[dict[str, Any]] = []
        if "kafka" in model.model_fields:
            carriers += [{"kafka": {k: secret}} for k in ("sasl.password", "ssl.key.password")]
            carriers.append({"kafka": {"sasl.jaas.config": f"x password={secret};"}})
        if name in ("probe", "stream"):
            carriers.append({"bootstrap": f"u:{secret}@127.0.0.1:9092"})
            carriers.append({"bootstrap": f"SASL_SSL://u:{secret}@127.0.0.1:9092"})
        if name == "probe":
            carriers.append({"bootstrap": f"nats://{secret}@127.0.0.1:4222"})
            carriers.append({"bootstrap": f"amqp://u:{secret}@127.0.0.1:5672/"})
        for carrier in carriers or [{}]:
            for field in model.model_fields:
                if field in carrier:
                    continue
                for bad in wrong:
                    base = {"bootstrap": "127.0.0.1:9092"} if name != "broker" else {}
                    yield name, {**base, **carrier, field: bad}
        if name == "stream":  # an error of the whole section (pydantic's input: all of it)
            yield name, {**carriers[0], "bootstrap": "h:1", "highest": "1us"}


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(secrets)
def test_no_config_error_prints_a_secret(secret: str) -> None:
    """Every stage, every carrier of a secret, every field made wrong: the printed line is clean."""
    checked = 0
    for name, values in _error_documents(secret):
        model = section_models()[name]
        try:
            build(model, section({name: values}, name), prefix=name)
        except ConfigError as exc:
            out = io.StringIO()
            sys.stderr, saved = out, sys.stderr
            try:
                print_error(name, str(exc))
            finally:
                sys.stderr = saved
            assert secret not in out.getvalue(), out.getvalue()
            assert out.getvalue().count("\n") == 1
            checked += 1
    assert checked > 500


@UNIT
@given(secrets, schemes, st.sampled_from(SECRET_KEYS))
def test_log_records_and_warnings_are_redacted(secret: str, scheme: str, key: str) -> None:
    install()
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
    log = logging.getLogger("nines.test.secrets")
    log.addHandler(handler)
    log.propagate = False
    url = f"{scheme}://{secret}@127.0.0.1:1"
    try:
        log.warning("cannot connect to %s", url)
        log.error("settings %r", {"kafka": {key: secret}})
        try:
            raise ConnectionError(f"refused: {url} {key}={secret}")
        except ConnectionError:
            log.exception("the probe stopped")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            warnings.warn(f"retrying {url}", stacklevel=1)
        shown = [
            warnings.formatwarning(w.message, w.category, w.filename, w.lineno) for w in caught
        ]
    finally:
        log.removeHandler(handler)
    assert secret not in stream.getvalue()
    assert "ConnectionError" in stream.getvalue()  # the traceback is kept, redacted
    assert shown and all(secret not in line for line in shown)


# --- the real CLI, bounded ----------------------------------------------------------------------

#: Secrets for the real runs, generated from the same alphabet (seeded: a failure reproduces).
_rng = random.Random(23)
RUN_SECRETS = [
    "Zq9" + "".join(_rng.choice(SECRET_CHARS) for _ in range(14)) + "@x:y" for _ in range(8)
]


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


IN_PROCESS = [
    ("probe", (), "probe:\n  rate: [1, 2]\n  kafka:\n    sasl.password: '{s}'\n"),
    ("stream", (), "stream:\n  highest: 1us\n  kafka:\n    sasl.password: '{s}'\n"),
    ("probe", (), "probe:\n  kafka:\n    sasl.password: {n}\n"),
    ("probe", ("--bootstrap", "SASL_SSL://user:{s}@127.0.0.1:9092"), None),
    ("probe", ("--bootstrap", "user:{s}@127.0.0.1:9092"), None),
    ("stream", ("--bootstrap", "user:{s}@127.0.0.1:9092"), None),
    ("probe", (), 'probe:\n  kafka: "sasl.password={s}"\n'),
    ("probe", (), "probe:\n  kafka:\n    sasl.passwd: '{s}'\n"),
]


@pytest.mark.parametrize(
    ("index", "command", "flags", "config"), [(i, *c) for i, c in enumerate(IN_PROCESS)]
)
def test_real_cli_in_process_prints_no_secret(
    index: int, command: str, flags: tuple[str, ...], config: str | None
) -> None:
    secret = RUN_SECRETS[index % len(RUN_SECRETS)]
    number = str(918273645 + index)
    fill = {"s": secret.replace("'", "''"), "n": number}
    flags = tuple(f.format(**fill) for f in flags)
    if command in ("probe", "stream") and "--bootstrap" not in flags:
        flags = ("--bootstrap", "LISTENER", *flags)
    text = config.format(**fill) if config else None
    result = outcome(Case("secrets", command, flags, text, ""))
    everything = result.out + result.err
    assert secret not in everything and number not in everything, everything
    assert result.code == 2 and len(result.err.splitlines()) == 1, everything


def run_nines(args: list[str], env: dict[str, str], tmp_path: Path) -> tuple[int, str]:
    """``nines ARGS`` as its own process, stdout and stderr into a log file; (status, text)."""
    log = tmp_path / "nines.log"
    with open(log, "wb") as f:
        code = subprocess.run(
            [sys.executable, "-m", "monitor", *args],
            stdout=f, stderr=subprocess.STDOUT, env={**os.environ, **env}, timeout=60,
        ).returncode  # fmt: skip
    return code, log.read_text(errors="replace")


def test_real_processes_print_no_secret(tmp_path: Path) -> None:
    """Connection failures, a librdkafka refusal and a secret from the environment: each path
    through a real process, its logging set up as in production."""
    port = closed_port()
    token, password, kafka_secret, env_secret = RUN_SECRETS[:4]
    config = tmp_path / "nines.yaml"
    config.write_text(
        yaml.safe_dump(
            {"probe": {"kafka": {"security.protocol": kafka_secret, "sasl.password": kafka_secret}}}
        )
    )
    runs = [
        [
            "probe",
            "--bootstrap",
            f"nats://{token}@127.0.0.1:{port}",
            "--echo-bootstrap",
            f"127.0.0.1:{port}",
        ],
        [
            "probe",
            "--bootstrap",
            f"amqp://u:{password}@127.0.0.1:{port}/",
            "--echo-bootstrap",
            f"127.0.0.1:{port}",
        ],
        ["probe", "--bootstrap", f"127.0.0.1:{port}", "--config", str(config)],
        ["probe", "--bootstrap", "env:NINES_TEST_URL", "--echo-bootstrap", f"127.0.0.1:{port}"],
    ]
    env = {"NINES_TEST_URL": f"redis://u:{env_secret}@127.0.0.1:{port}/0"}
    for args, secret in zip(runs, (token, password, kafka_secret, env_secret), strict=True):
        code, text = run_nines([*args, "--metrics-port", "0", "--duration", "5s"], env, tmp_path)
        assert secret not in text, text
        assert code == 2, text
        assert "Traceback" not in text, text
        assert REDACTED in text or "Invalid value" in text or "redis://" in text, text
