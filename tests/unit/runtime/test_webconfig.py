"""The exporter-toolkit web config: parsed up front, bcrypt basic auth, TLS context."""

from __future__ import annotations

import base64
import ssl
from pathlib import Path

import bcrypt
import pytest
from tls_material import make_tls

from core.config import ConfigError
from runtime.basic_auth import parse_basic_auth
from runtime.webconfig import load_web_config


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


def _malformed(good: str) -> list[str]:
    """Ways a bcrypt hash is mangled by hand: cut, padded, wrong cost or prefix, bad characters."""
    return [
        good[:-1],
        good + "A",
        good[:29],
        "$2b$03$" + good[7:],
        "$2b$32$" + good[7:],
        "$2b$1$" + good[7:],
        "$2x$" + good[4:],
        "$2$" + good[4:],
        good[:20] + "!" + good[21:],
        good[:20] + "é" + good[21:],
        good.replace("$", "", 1),
        " " + good,
        "$2y$10$",
    ]


def test_a_malformed_bcrypt_hash_is_refused_at_start_in_one_line(tmp_path: Path) -> None:
    good = bcrypt.hashpw(b"s3cret", bcrypt.gensalt(rounds=4)).decode()
    assert load_web_config(write(tmp_path, f"basic_auth_users:\n  a: '{good}'\n")) is not None
    for bad in _malformed(good):
        with pytest.raises(ConfigError) as err:
            load_web_config(write(tmp_path, f"basic_auth_users:\n  a: '{bad}'\n"))
        message = str(err.value)
        assert message.startswith(
            "web-config-file.basic_auth_users: user 'a': the password must be a bcrypt hash"
        ), (bad, message)
        assert "\n" not in message


def test_a_malformed_hash_is_exit_2_and_one_line_from_the_cli(tmp_path: Path) -> None:
    import subprocess
    import sys

    path = write(tmp_path, "basic_auth_users:\n  prometheus: '$2y$10$tooshort'\n")
    out = subprocess.run(
        [sys.executable, "-m", "monitor", "probe", "--bootstrap", "127.0.0.1:1",
         "--metrics-port", "0", "--web-config-file", str(path)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "basic_auth_users: user 'prometheus'" in lines[0], out.stderr
    assert "Traceback" not in out.stderr


def test_passwords_over_72_bytes_are_refused_never_checked_by_their_prefix(
    tmp_path: Path,
) -> None:
    prefix = "p" * 72
    hashed = bcrypt.hashpw(prefix.encode(), bcrypt.gensalt(rounds=4)).decode()
    web = load_web_config(write(tmp_path, f"basic_auth_users:\n  u: '{hashed}'\n"))
    assert web is not None
    assert web.authorized(basic("u", prefix))  # exactly 72 bytes: checked
    for longer in (prefix + "x", prefix + "anything at all", "é" * 37):  # 73+ bytes
        assert web.check(basic("u", longer)) is False  # no ValueError from bcrypt 5, no 500


def test_failures_are_never_remembered(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    hashed = bcrypt.hashpw(b"right", bcrypt.gensalt(rounds=4)).decode()
    web = load_web_config(write(tmp_path, f"basic_auth_users:\n  u: '{hashed}'\n"))
    assert web is not None
    checks = []
    real = bcrypt.checkpw
    monkeypatch.setattr(bcrypt, "checkpw", lambda p, h: checks.append(p) or real(p, h))
    for i in range(1100):  # more wrong guesses than the memory holds
        assert not web.authorized(basic("u", f"guess-{i}"))
    assert len(checks) == 1100 and not web.auth._verified  # each guess checked, none kept
    assert web.authorized(basic("u", "right"))
    assert web.authorized(basic("u", "right"))
    assert len(checks) == 1101  # the real credential is remembered after all those guesses
    assert not web.authorized(basic("u", "guess-0"))
    assert len(checks) == 1102  # and a repeated wrong guess is checked again


def test_bcrypt_checks_are_bounded_and_busy_is_not_a_no(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import runtime.basic_auth as wc

    monkeypatch.setattr(wc, "BCRYPT_WAIT_S", 0.2)
    hashed = bcrypt.hashpw(b"right", bcrypt.gensalt(rounds=4)).decode()
    web = load_web_config(write(tmp_path, f"basic_auth_users:\n  u: '{hashed}'\n"))
    assert web is not None
    for _ in range(wc.MAX_BCRYPT_CHECKS):  # every check slot taken (as by slow guesses)
        assert web.auth._checks.acquire(timeout=1)
    assert web.check(basic("u", "right")) is None  # busy: the server answers 503, not 401
    for _ in range(wc.MAX_BCRYPT_CHECKS):
        web.auth._checks.release()
    assert web.check(basic("u", "right")) is True
    for _ in range(wc.MAX_BCRYPT_CHECKS):
        assert web.auth._checks.acquire(timeout=1)
    assert web.check(basic("u", "right")) is True  # remembered: needs no check slot
