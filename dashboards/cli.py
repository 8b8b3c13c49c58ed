"""``nines dashboards``: export the generated dashboards, or push them to Grafana."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from core.config import ConfigError
from runtime.files import MAX_SECRET_BYTES, read_text_bounded

EXPORT_EXAMPLES = """examples:
  nines dashboards export                      # writes dashboards/json/*.json
  nines dashboards export /tmp/dash
"""
PUSH_EXAMPLES = """examples:
  GRAFANA_TOKEN=... nines dashboards push --url http://grafana:3000 --folder nines
  nines dashboards push --url https://grafana.example.com/grafana --user admin --password $PW

exit status: 0 pushed; 2 bad input: an invalid or unreachable --url, or credentials Grafana
refuses (HTTP 401, or 403 for a token without the rights); 1 any other Grafana error.
Errors are one line on stderr.
"""
EXAMPLES = EXPORT_EXAMPLES + PUSH_EXAMPLES.split("\n\n")[0].removeprefix("examples:\n") + "\n"


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add the ``dashboards`` subcommand."""
    p = sub.add_parser(
        "dashboards",
        help="Export or push the Grafana dashboards.",
        description="Grafana dashboards built as code (grafana-foundation-sdk). No panel averages "
        "a quantile: aggregation goes through histogram buckets or max.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    e = actions.add_parser(
        "export",
        help="write the dashboard JSON files",
        description="Write every dashboard as DIR/<uid>.json (Grafana's import format).",
        epilog=EXPORT_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    e.add_argument("dir", nargs="?", default="dashboards/json", help="output directory")
    e.set_defaults(func=run_export)
    u = actions.add_parser(
        "push",
        help="upload to Grafana (idempotent: overwrite by uid)",
        description="Upload every dashboard into a Grafana folder (created if missing), "
        "overwriting by uid, so pushing twice is harmless.",
        epilog=PUSH_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    u.add_argument("--url", required=True, help="Grafana base URL")
    u.add_argument(
        "--token", default=None, help="API token (or --user/--password); prefer $GRAFANA_TOKEN"
    )
    u.add_argument("--token-file", default=None, help="read the API token from this file")
    u.add_argument("--user", default=None, help="Grafana user (default $GRAFANA_USER)")
    u.add_argument("--password", default=None, help="prefer $GRAFANA_PASSWORD or --password-file")
    u.add_argument("--password-file", default=None, help="read the password from this file")
    u.add_argument("--folder", default="nines", help="folder title (created if missing)")
    u.set_defaults(func=run_push)


def export(directory: str | Path) -> list[Path]:
    """Write every dashboard as ``<uid>.json``."""
    from dashboards import build_all, to_json

    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for uid, dash in sorted(build_all().items()):
        path = out / f"{uid}.json"
        path.write_text(to_json(dash))
        paths.append(path)
    return paths


def run_export(args: argparse.Namespace) -> int:
    """Export to a directory."""
    for path in export(args.dir):
        print(path)
    return 0


def _shown_url(url: str) -> str:
    """The URL without user:password@ (credentials never reach a message)."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    netloc = parts.netloc.rpartition("@")[2]
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def _check_url(url: str) -> None:
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018  (raises on a bad port)
    except ValueError:
        parts = None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"url: expected http(s)://HOST[:PORT][/PATH] (got {_shown_url(url)!r})")


def _reason(exc: BaseException) -> str:
    """A short cause for a connection failure: '[Errno 111] Connection refused' -> that."""
    import re

    text = str(exc)
    m = re.search(r"\[Errno -?\d+\] ([^'\")]+)", text) or re.search(
        r"Failed to resolve '[^']*' \(([^:)]+)", text
    )
    if m:
        return m.group(1).strip()
    if "timed out" in text.lower() or "timeout" in type(exc).__name__.lower():
        return "timed out"
    return type(exc).__name__


def _secret(flag: str | None, path: str | None, env: Mapping[str, str], var: str) -> str | None:
    """A credential from its flag, its file (first line) or its environment variable, in order.

    Files and variables keep secrets out of argv, where ``ps`` and shell history show them.
    """
    if flag:
        return flag
    if path:
        try:
            return read_text_bounded(path, MAX_SECRET_BYTES).strip() or None
        except (OSError, UnicodeDecodeError) as exc:
            why = getattr(exc, "strerror", None) or "not UTF-8 text"
            field = var.lower().removeprefix("grafana_")
            raise ConfigError(f"{field}-file: cannot read {path}: {why}") from None
    return env.get(var) or None


def credentials(args: argparse.Namespace, env: Mapping[str, str]) -> tuple[Any, str]:
    """(credential for grafana_client, the field to blame) from flags, files or the environment."""
    token = _secret(args.token, getattr(args, "token_file", None), env, "GRAFANA_TOKEN")
    if token:
        return token, "token"
    user = args.user or env.get("GRAFANA_USER")
    password = _secret(args.password, getattr(args, "password_file", None), env, "GRAFANA_PASSWORD")
    if user and password:
        return (user, password), "user"
    raise ConfigError(
        "push: give a token ($GRAFANA_TOKEN, --token-file or --token), or a user and password "
        "($GRAFANA_USER/$GRAFANA_PASSWORD, --password-file, or --user/--password)"
    )


def run_push(args: argparse.Namespace) -> int:
    """Upload every dashboard into the folder, overwriting by uid.

    Exit 2 (bad input): an invalid or unreachable --url, or credentials Grafana refuses
    (401, or 403 for a token without the rights). Exit 1: any other Grafana error. Either way
    one line on stderr, never a traceback.
    """
    import os
    import sys

    from grafana_client import GrafanaApi
    from grafana_client.client import GrafanaClientError, GrafanaException, GrafanaTimeoutError
    from niquests.exceptions import RequestException

    from dashboards import build_all

    auth, field = credentials(args, os.environ)
    _check_url(args.url)
    url = _shown_url(args.url)
    api = GrafanaApi.from_url(args.url, credential=auth)
    try:
        folders = {f["title"]: f for f in api.folder.get_all_folders()}
        folder = folders.get(args.folder) or api.folder.create_folder(args.folder)
        for uid, dash in sorted(build_all().items()):
            api.dashboard.update_dashboard(
                {"dashboard": {**dash, "id": None}, "folderUid": folder["uid"], "overwrite": True}
            )
            print(f"pushed {uid} to folder {args.folder!r}")
    except (RequestException, GrafanaTimeoutError) as exc:
        raise ConfigError(f"url: cannot reach {url} ({_reason(exc)})") from None
    except GrafanaClientError as exc:
        if exc.status_code in (401, 403):
            what = "rejected the credentials" if exc.status_code == 401 else "denied access"
            raise ConfigError(
                f"{field}: Grafana at {url} {what} (HTTP {exc.status_code}: {_message(exc)})"
            ) from None
        print(f"nines dashboards: error: grafana: {url}: {exc.message}", file=sys.stderr)
        return 1
    except GrafanaException as exc:
        if exc.status_code == 0:  # a transport error the client wrapped
            raise ConfigError(f"url: cannot reach {url} ({_reason(exc)})") from None
        print(f"nines dashboards: error: grafana: {url}: {exc.message}", file=sys.stderr)
        return 1
    return 0


def _message(exc: BaseException) -> str:
    """Grafana's own one-line message from an error response."""
    response = getattr(exc, "response", None)
    if isinstance(response, dict) and response.get("message"):
        text = str(response["message"])
    else:
        text = str(getattr(exc, "message", "") or exc) or type(exc).__name__
    return " ".join(text.split())[:200]
