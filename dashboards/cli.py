"""``nines dashboards``: export the generated dashboards, or push them to Grafana."""

from __future__ import annotations

import argparse
from pathlib import Path

from monitor.config import ConfigError

EXAMPLES = """examples:
  nines dashboards export                      # writes dashboards/json/*.json
  nines dashboards export /tmp/dash
  nines dashboards push --url http://grafana:3000 --token $GRAFANA_TOKEN --folder nines
"""


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
    e = actions.add_parser("export", help="write the dashboard JSON files")
    e.add_argument("dir", nargs="?", default="dashboards/json", help="output directory")
    e.set_defaults(func=run_export)
    u = actions.add_parser("push", help="upload to Grafana (idempotent: overwrite by uid)")
    u.add_argument("--url", required=True, help="Grafana base URL")
    u.add_argument("--token", default=None, help="API token (or --user/--password)")
    u.add_argument("--user", default=None)
    u.add_argument("--password", default=None)
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


def run_push(args: argparse.Namespace) -> int:
    """Upload every dashboard into the folder, overwriting by uid."""
    from grafana_client import GrafanaApi

    from dashboards import build_all

    if args.token:
        auth: str | tuple[str, str] = args.token
    elif args.user and args.password:
        auth = (args.user, args.password)
    else:
        raise ConfigError("push: give --token, or --user and --password")
    api = GrafanaApi.from_url(args.url, credential=auth)
    folders = {f["title"]: f for f in api.folder.get_all_folders()}
    folder = folders.get(args.folder) or api.folder.create_folder(args.folder)
    for uid, dash in sorted(build_all().items()):
        api.dashboard.update_dashboard(
            {"dashboard": {**dash, "id": None}, "folderUid": folder["uid"], "overwrite": True}
        )
        print(f"pushed {uid} to folder {args.folder!r}")
    return 0
