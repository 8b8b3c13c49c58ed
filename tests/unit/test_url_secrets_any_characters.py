"""A URL's password is hidden whatever characters it holds: spaces, tabs, quotes, newlines.

The amqp://, redis:// and nats:// transports print their URL in their errors; the redactor cuts
the user info by the URL's structure (``core.redact.redact_url``) and remembers the secret, so a
library or a validation error that quotes it back is redacted too. Generated passwords of
arbitrary characters go through each transport's real error path (a refused connection, a bad
port), in-process through ``monitor.cli.main``, and through real processes for a few.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from bad_input_cases import Case, run
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from core.redact import MIN_REMEMBERED, REDACTED, redact_text, redact_url, remember_url

#: Any character a str can print (no surrogates), whitespace and quotes above all.
ANY_CHAR = st.one_of(
    st.sampled_from(" \t\n\r'\"\\`<>{}@:/#?%&=;,"),
    st.characters(blacklist_categories=("Cs",)),
)
# A distinctive head keeps a secret from occurring in a message by chance.
passwords = st.text(ANY_CHAR, min_size=1, max_size=20).map(lambda s: "Zq9" + s + "Wx")
TRANSPORTS = ("amqp", "redis", "nats")


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def url(scheme: str, password: str, port: int, user: str | None = "probe") -> str:
    userinfo = password if user is None else f"{user}:{password}"  # "": ``:password``
    return f"{scheme}://{userinfo}@127.0.0.1:{port}/"


def hidden(secret: str, text: str) -> bool:
    """Neither the secret nor how a repr or JSON would quote it appears in ``text``."""
    forms = {secret, repr(secret)[1:-1], secret.encode("unicode_escape").decode()}
    return not any(f in text for f in forms)


@settings(max_examples=400, deadline=None)
@given(passwords, st.sampled_from(TRANSPORTS), st.none() | st.just("probe"))
def test_redact_url_cuts_by_structure(password: str, scheme: str, user: str | None) -> None:
    shown = redact_url(url(scheme, password, 5672, user))
    assert hidden(password, shown), shown
    assert shown.endswith("@127.0.0.1:5672/") and shown.startswith(f"{scheme}://")
    if user:
        assert f"probe:{REDACTED}@" in shown
    else:  # a token: all of it is secret, unless a ``:`` makes its head a user (RFC 3986)
        head, colon, rest = password.partition(":")
        assert f"{head}:{REDACTED}@" in shown if colon and rest else f"//{REDACTED}@" in shown


@settings(max_examples=120, deadline=None)
@given(passwords, st.sampled_from(TRANSPORTS), st.sampled_from([None, "", "probe"]))
def test_a_remembered_password_is_hidden_wherever_it_is_quoted(
    password: str, scheme: str, user: str | None
) -> None:
    target = url(scheme, password, 6379, user)
    remember_url(target)
    if user is None and ":" in password:  # a ``:`` makes the token's head a user (RFC 3986)
        password = password.partition(":")[2]
        # what is left can be shorter than a secret worth remembering (``Zq9:Wx``: ``Wx``)
        assume(len(password) >= MIN_REMEMBERED)
    for text in (
        f"cannot connect: {target}",
        f"got {target!r}",
        f"settings {{'url': {target!r}, 'password': {password!r}}}",
        f"library says: auth failed for password {password}.",
    ):
        assert hidden(password, redact_text(text)), redact_text(text)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(passwords, st.sampled_from(TRANSPORTS), st.booleans())
def test_each_transport_error_path_prints_no_password(
    password: str, scheme: str, bad_port: bool
) -> None:
    """The real command, in-process: a refused connection or a port out of range."""
    port = closed_port()
    target = url(scheme, password, 99999 if bad_port else port)
    flags = ("--bootstrap", target, "--echo-bootstrap", f"127.0.0.1:{port}")
    flags += ("--metrics-port", "0", "--duration", "3s")
    result = run(Case("secrets", "probe", flags))
    everything = result.out + result.err
    assert hidden(password, everything), everything
    assert result.code == 2 and len(result.err.splitlines()) == 1, everything
    assert f"{scheme}://probe:{REDACTED}@127.0.0.1" in result.err, everything


@pytest.mark.parametrize("scheme", TRANSPORTS)
def test_real_process_with_whitespace_in_the_password(scheme: str, tmp_path: Path) -> None:
    """As an operator runs it: its own process, its logging as in production."""
    password = "Zq9 pass\tword ' \" x"
    port = closed_port()
    args = ["probe", "--bootstrap", url(scheme, password, port)]
    args += ["--echo-bootstrap", f"127.0.0.1:{port}", "--metrics-port", "0", "--duration", "3s"]
    done = subprocess.run(
        [sys.executable, "-m", "monitor", *args],
        capture_output=True, text=True, timeout=60, env={**os.environ}, cwd=tmp_path,
    )  # fmt: skip
    everything = done.stdout + done.stderr
    assert hidden(password, everything) and "Zq9" not in everything, everything
    assert done.returncode == 2 and len(done.stderr.splitlines()) == 1, everything
