"""The Apache Kafka jars the ``kafka`` engine runs: resolved once with Maven, then cached.

``testbroker/kafka/pom.xml`` pins one Kafka release and a log4j2 backend. ``mvn`` downloads them
into its own cache (``~/.m2``) once; we keep the resulting classpath in
``$XDG_CACHE_HOME/nines/kafka-<pom hash>.classpath`` so later starts need neither Maven nor the
network. ``NINES_KAFKA_CLASSPATH`` names a classpath of the user's own instead.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

from runtime.maven import cache_dir, run_mvn

POM = Path(__file__).resolve().parent / "kafka" / "pom.xml"
CLASSPATH_ENV = "NINES_KAFKA_CLASSPATH"
#: Maven's first resolution downloads about 60 MB; later ones read its cache.
RESOLVE_TIMEOUT_S = 900.0


class KafkaJarsError(RuntimeError):
    """Maven is missing or could not resolve the pinned Kafka; the message says which, once."""


def kafka_version() -> str:
    """The Apache Kafka release the pom pins (``kafka.version``)."""
    text = POM.read_text()
    start = text.index("<kafka.version>") + len("<kafka.version>")
    return text[start : text.index("</kafka.version>", start)]


def cache_file() -> Path:
    """Where the resolved classpath is kept: named by the pom's hash, so a new pin re-resolves."""
    digest = hashlib.sha1(POM.read_bytes()).hexdigest()[:12]
    return cache_dir() / f"kafka-{kafka_version()}-{digest}.classpath"


def _usable(classpath: str) -> bool:
    jars = [p for p in classpath.split(os.pathsep) if p]
    return bool(jars) and all(Path(p).is_file() for p in jars)


def resolve(quiet: bool = True) -> str:
    """The broker's classpath: the env's, the cached one, or Maven's answer (then cached)."""
    env = os.environ.get(CLASSPATH_ENV, "").strip()
    if env:
        if not _usable(env):
            raise KafkaJarsError(f"{CLASSPATH_ENV}: a jar it names does not exist")
        return env
    cached = cache_file()
    if cached.is_file():
        classpath = cached.read_text().strip()
        if _usable(classpath):
            return classpath
    if shutil.which("mvn") is None:
        raise KafkaJarsError(
            "Apache Kafka's jars are resolved with Maven: install it (apt-get install maven) "
            "or set NINES_KAFKA_CLASSPATH"
        )
    cached.parent.mkdir(parents=True, exist_ok=True)
    out = cached.with_name(f".{cached.name}.{os.getpid()}.tmp")
    args = ["dependency:build-classpath", "-Dmdep.includeScope=runtime", f"-Dmdep.outputFile={out}"]
    why = run_mvn(POM, args, RESOLVE_TIMEOUT_S, quiet=quiet)
    if why is not None or not out.is_file():
        raise KafkaJarsError(
            f"mvn could not resolve Apache Kafka {kafka_version()}: {why or 'no classpath'}"
        )
    classpath = out.read_text().strip()
    os.replace(out, cached)
    return classpath


def main() -> int:
    """``python -m testbroker.kafka_jars``: resolve now (``make kafka-jars``), print the cache."""
    import sys

    try:
        resolve(quiet=True)
    except KafkaJarsError as exc:
        print(f"nines: error: {exc}", file=sys.stderr)
        return 2
    print(f"Apache Kafka {kafka_version()}: {cache_file()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
