"""``nines dashboards push``: unreachable Grafana, refused credentials and server errors are one
line on stderr (exit 2 for bad input, 1 otherwise), never a traceback or a credential."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from core.config import ConfigError
from monitor.cli import main


def test_unreachable_url_exits_2_with_one_line() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "monitor", "dashboards", "push", "--url",
         "http://admin:hunter2@127.0.0.1:1", "--token", "glsa_secret"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.returncode == 2, out.stderr
    assert (
        out.stderr
        == "nines dashboards: error: url: cannot reach http://127.0.0.1:1 (Connection refused)\n"
    )
    assert out.stdout == ""


@pytest.fixture
def grafana() -> Iterator[dict[str, int]]:
    """A fake Grafana answering every request with ``state['status']`` and a JSON message."""
    state = {"status": 401}

    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            body = json.dumps({"message": "invalid API key"}).encode()
            self.send_response(state["status"])
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = _answer

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state["port"] = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield state
    server.shutdown()
    server.server_close()


TOKEN = ["--token", "glsa_secret"]
USER = ["--user", "admin", "--password", "hunter2"]
REJECTED = "Grafana at {url} rejected the credentials (HTTP 401: invalid API key)"


@pytest.mark.parametrize(
    ("status", "credentials", "code", "message"),
    [
        (401, TOKEN, 2, f"token: {REJECTED}"),
        (401, USER, 2, f"user: {REJECTED}"),
        (403, TOKEN, 2, "token: Grafana at {url} denied access (HTTP 403: invalid API key)"),
        (500, TOKEN, 1, "grafana: {url}: Server Error 500: invalid API key"),
    ],
    ids=["401-token", "401-user", "403", "500"],
)
def test_grafana_refusals_are_one_line(
    grafana: dict[str, int],
    status: int,
    credentials: list[str],
    code: int,
    message: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    grafana["status"] = status
    url = f"http://127.0.0.1:{grafana['port']}"
    assert main(["dashboards", "push", "--url", url, *credentials]) == code
    out = capsys.readouterr()
    assert out.err == f"nines dashboards: error: {message.format(url=url)}\n"
    assert out.out == ""
    assert "glsa_secret" not in out.err and "hunter2" not in out.err


def test_bad_url_is_rejected_before_any_request(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["dashboards", "push", "--url", "grafana:3000", "--token", "t"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("nines dashboards: error: url: expected http(s)://HOST")


def test_credentials_come_from_the_environment_or_a_file_not_only_argv(tmp_path: Path) -> None:
    import argparse

    from dashboards.cli import credentials

    def args(**kw: str | None) -> argparse.Namespace:
        base = {"token": None, "token_file": None, "user": None, "password": None}
        return argparse.Namespace(**{**base, "password_file": None, **kw})

    assert credentials(args(), {"GRAFANA_TOKEN": "glsa_env"}) == ("glsa_env", "token")
    token_file = tmp_path / "token"
    token_file.write_text("glsa_file\n")
    assert credentials(args(token_file=str(token_file)), {}) == ("glsa_file", "token")
    assert credentials(args(token="glsa_flag"), {"GRAFANA_TOKEN": "x"}) == ("glsa_flag", "token")
    env = {"GRAFANA_USER": "admin", "GRAFANA_PASSWORD": "hunter2"}
    assert credentials(args(), env) == (("admin", "hunter2"), "user")
    pw = tmp_path / "pw"
    pw.write_text("from-file")
    assert credentials(args(user="ops", password_file=str(pw)), {}) == (
        ("ops", "from-file"),
        "user",
    )
    with pytest.raises(ConfigError, match=r"^push: give a token \(\$GRAFANA_TOKEN"):
        credentials(args(), {})
    with pytest.raises(ConfigError, match=r"^token-file: cannot read /no/such: No such file"):
        credentials(args(token_file="/no/such"), {})
