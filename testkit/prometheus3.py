"""Prometheus 3 for the end-to-end tests, built once from its Go module and cached.

Debian 12 ships Prometheus 2.42; users run 3.x, which scrapes, parses templates and turns on
native histograms differently (docs/metrics.md, docs/alerts.md). ``testkit/prometheus3/go.mod``
pins ``github.com/prometheus/prometheus`` (release 3.16.0 is module version v0.316.0) and its
go.sum the bytes; ``prometheus`` and ``promtool`` are built from it without the web UI's assets
(the tests use the HTTP API only) into ``$XDG_CACHE_HOME/nines/prometheus3/<version>-<hash>/``.
Alertmanager stays Debian's 0.25 (API v2, which Prometheus 3 speaks). ``python -m
testkit.prometheus3`` builds what is missing; the test run does it in the background.
"""

from __future__ import annotations

from pathlib import Path

from testkit import gobuild

MODULE = "github.com/prometheus/prometheus"


def release() -> str:
    """The Prometheus release go.mod pins: module version v0.3YY.Z is release 3.YY.Z."""
    minor_patch = PROMETHEUS3.pinned(MODULE).lstrip("v").split(".")[1:]
    return f"3.{int(minor_patch[0]) - 300}.{minor_patch[1]}"


def _ldflags(tools: gobuild.GoTools, binary: str) -> str:
    """The release stamped in, so ``--version`` says it (the tests read the major version)."""
    pkg = "github.com/prometheus/common/version"
    return f"-s -w -X {pkg}.Version={release()} -X {pkg}.Branch=release -X {pkg}.Revision=module"


PROMETHEUS3 = gobuild.GoTools(
    name="prometheus3",
    module_dir=Path(__file__).resolve().parent / "prometheus3",
    binaries={"prometheus": f"{MODULE}/cmd/prometheus", "promtool": f"{MODULE}/cmd/promtool"},
    version_module=MODULE,
    ldflags=_ldflags,
    main_module="testkit.prometheus3",
)


def main() -> int:
    """``python -m testkit.prometheus3``: build what is missing, print the cache."""
    return gobuild.main(PROMETHEUS3, lambda: f"Prometheus {release()}")


if __name__ == "__main__":
    raise SystemExit(main())
