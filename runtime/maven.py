"""Maven, run once for a jar or a classpath the project pins, with one-line failures.

The stream's histogram merge jar (``streaming.aggregator_jar``) and the Apache Kafka broker's
classpath (``testbroker.kafka_jars``) are both built by ``mvn`` from a pom in the repository and
cached under ``$XDG_CACHE_HOME/nines``; this is the part they share.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path


def cache_dir() -> Path:
    """``$XDG_CACHE_HOME/nines`` (``~/.cache/nines``): where built jars and classpaths are kept."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "nines"


def run_mvn(pom: Path, args: list[str], timeout_s: float, *, quiet: bool = True) -> str | None:
    """Run ``mvn -B -f pom ARGS``; None when it succeeded, else why not, in one line.

    Maven's own output is kept from the screen when ``quiet``; its first ``ERROR`` line is the
    reason given. A missing ``mvn`` is the caller's to name (it knows the remedy).
    """
    mvn = shutil.which("mvn")
    if mvn is None:
        return "mvn is not installed"
    argv = [mvn, "-B", *(["-q"] if quiet else []), "-f", str(pom), *args]
    try:
        done = subprocess.run(argv, capture_output=quiet, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        return f"mvn did not finish within {timeout_s:.0f} s"
    if done.returncode == 0:
        return None
    errors = [ln for ln in (done.stdout or "").splitlines() if "ERROR" in ln]
    return errors[0].strip() if errors else f"exit {done.returncode}"


def cached_jar(module: Path, name: str) -> Path:
    """Where ``module``'s jar ``name`` is cached: named by a hash of its pom and Java sources,
    so a changed source rebuilds."""
    digest = hashlib.sha1()
    for p in sorted([module / "pom.xml", *(module / "src").rglob("*.java")]):
        digest.update(p.relative_to(module).as_posix().encode() + b"\0" + p.read_bytes())
    return cache_dir() / f"{name}-{digest.hexdigest()[:12]}.jar"


def build_jar(module: Path, name: str, timeout_s: float) -> str | None:
    """``mvn package`` of ``module`` (its ``finalName`` is ``name``) into :func:`cached_jar`;
    None when the jar is there, else why not, in one line."""
    cached = cached_jar(module, name)
    cached.parent.mkdir(parents=True, exist_ok=True)
    target = cached.with_name(f".build-{name}-{os.getpid()}")
    why = run_mvn(module / "pom.xml", ["package", f"-Dnines.build.dir={target}"], timeout_s)
    jar = target / f"{name}.jar"
    if why is None and jar.is_file():
        os.replace(jar, cached)
    shutil.rmtree(target, ignore_errors=True)
    return why if why is not None else None if cached.is_file() else "no jar"
