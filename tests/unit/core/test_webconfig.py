"""The exporter-toolkit web config: parsed up front, bcrypt basic auth, TLS context."""

from __future__ import annotations

import base64
import ssl
from pathlib import Path

import bcrypt
import pytest
from tls_material import make_tls

from core.config import ConfigError
from core.webconfig import load_web_config, parse_basic_auth


def basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "web.yml"
    path.write_text(text)
    return path


def test_basic_auth_checks_bcrypt_hashes(tmp_path: Path) -> None:
    hashed = bcrypt.hashpw(b"s3cret", bcrypt.gensalt(rounds=4)).decode()
    web = load_web_config(write(tmp_path, f"basic_auth_users:\n  prometheus: '{hashed}'\n"))
    assert web is not None and web.ssl_context() is None
    assert web.authorized(basic("prometheus", "s3cret"))
    assert web.authorized(basic("prometheus", "s3cret"))  # remembered, same answer
    assert not web.authorized(basic("prometheus", "wrong"))
    assert not web.authorized(basic("other", "s3cret"))
    assert not web.authorized(None)
    assert not web.authorized("Bearer abc")
    assert not web.authorized("Basic !!!not-base64")


def test_no_users_means_no_auth(tmp_path: Path) -> None:
    web = load_web_config(write(tmp_path, "http_server_config: {}\n"))
    assert web is not None and web.authorized(None)
    assert load_web_config(None) is None


def test_tls_context_from_the_files(tmp_path: Path) -> None:
    tls = make_tls(tmp_path / "tls")
    web = load_web_config(
        write(
            tmp_path,
            f"tls_server_config:\n  cert_file: {tls.cert}\n  key_file: {tls.key}\n"
            "  min_version: TLS13\n",
        )
    )
    assert web is not None
    ctx = web.ssl_context()
    assert isinstance(ctx, ssl.SSLContext)
    assert ctx.minimum_version == ssl.TLSVersion.TLSv1_3
    assert ctx.verify_mode == ssl.CERT_NONE


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("basic_auth_users:\n  a: plaintext\n",
         "web-config-file.basic_auth_users: user 'a': the password must be a bcrypt hash"),
        ("tls_server_config:\n  cert_file: /no/cert\n  key_file: /no/key\n",
         "web-config-file: tls_server_config: cannot load: No such file"),
        ("tls_server_config:\n  cert_file: x\n", "web-config-file.tls_server_config.key_file"),
        ("tls_srever_config: {}\n", "web-config-file.tls_srever_config: unknown key"),
        ("tls_server_config:\n  cert_file: a\n  key_file: b\n  min_version: TLS9\n",
         "web-config-file.tls_server_config.min_version"),
    ],
)  # fmt: skip
def test_bad_files_are_one_line(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_web_config(write(tmp_path, text))
    assert str(err.value).startswith(message), str(err.value)
    assert "\n" not in str(err.value)


def test_client_certificates_need_the_ca(tmp_path: Path) -> None:
    tls = make_tls(tmp_path / "tls")
    text = (
        f"tls_server_config:\n  cert_file: {tls.cert}\n  key_file: {tls.key}\n"
        "  client_auth_type: RequireAndVerifyClientCert\n"
    )
    with pytest.raises(ConfigError, match="needs client_ca_file"):
        load_web_config(write(tmp_path, text))
    web = load_web_config(write(tmp_path, text + f"  client_ca_file: {tls.ca}\n"))
    assert web is not None
    ctx = web.ssl_context()
    assert ctx is not None and ctx.verify_mode == ssl.CERT_REQUIRED


def test_parse_basic_auth() -> None:
    assert parse_basic_auth(basic("u", "p:with:colons")) == ("u", "p:with:colons")
    assert parse_basic_auth("Basic " + base64.b64encode(b"nocolon").decode()) == (None, None)
