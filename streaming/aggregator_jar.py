"""The JVM half of the state: ``jvm/aggregator``'s jar (``HistogramMerge``), built once, cached.

The job puts this jar on ``spark.jars`` (a local path: Spark ships it to its executors, nothing
is downloaded at job start) and registers ``nines_hist_merge`` through the gateway.
``make aggregator-jar`` (part of ``make setup``) builds it with Maven into
``$XDG_CACHE_HOME/nines/``, named by a hash of its sources, so a changed source rebuilds;
``NINES_AGGREGATOR_JAR`` names a jar of the user's own (the image sets it).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from runtime.maven import build_jar, cached_jar

MODULE = Path(__file__).resolve().parent.parent / "jvm" / "aggregator"
JAR_ENV = "NINES_AGGREGATOR_JAR"
#: Maven's first build downloads its plugins and Spark's API jars (about 20 MB).
BUILD_TIMEOUT_S = 900.0
#: The SQL name ``dev.nines.spark.HistogramMerge`` registers the aggregate under.
FUNCTION = "nines_hist_merge"


class AggregatorJarError(RuntimeError):
    """No jar, and no way to build one here; the message says what to do, in one line."""


def cache_file() -> Path:
    """The cached jar, named by its sources' hash."""
    return cached_jar(MODULE, "nines-aggregator")


def resolve(build: bool = True) -> str:
    """The jar's path: the env's, the cached one, or (``build``) a fresh Maven build, cached."""
    env = os.environ.get(JAR_ENV, "").strip()
    if env:
        if not Path(env).is_file():
            raise AggregatorJarError(f"{JAR_ENV}: {env} does not exist")
        return env
    if not (MODULE / "pom.xml").is_file():
        raise AggregatorJarError(
            f"the histogram merge jar is not installed: set {JAR_ENV} (the image sets it)"
        )
    cached = cache_file()
    if cached.is_file():
        return str(cached)
    if not build or shutil.which("mvn") is None:
        raise AggregatorJarError(
            "the histogram merge jar is not built: run `make aggregator-jar` (needs Maven and "
            f"Java 17) or set {JAR_ENV}"
        )
    why = build_jar(MODULE, "nines-aggregator", BUILD_TIMEOUT_S)
    if why is not None:
        raise AggregatorJarError(f"mvn could not build the histogram merge jar: {why}")
    return str(cached)


def register(spark: object) -> None:
    """Register ``FUNCTION`` in ``spark`` (whose ``spark.jars`` holds the jar)."""
    jvm = spark._jvm  # type: ignore[attr-defined]
    jvm.dev.nines.spark.HistogramMerge.register(spark._jsparkSession)  # type: ignore[attr-defined]


def main() -> int:
    """``python -m streaming.aggregator_jar``: build now (``make aggregator-jar``), print it."""
    import sys

    try:
        print(resolve(build=True))
    except AggregatorJarError as exc:
        print(f"nines: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
