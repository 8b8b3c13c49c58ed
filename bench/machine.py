"""Facts about the machine and software a benchmark ran on, stamped into every result file."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

#: Where raw result JSON goes (committed with the report); the report is generated from these only.
RESULTS_DIR = Path(__file__).resolve().parent / "results"


def _pyspark_version() -> str:
    """PySpark's version without starting a JVM."""
    try:
        import pyspark

        return str(pyspark.__version__)
    except Exception as exc:  # pragma: no cover - depends on the environment
        return f"unavailable ({type(exc).__name__})"


def _librdkafka_version() -> str:
    """librdkafka's version as linked by confluent-kafka."""
    try:
        import confluent_kafka

        return str(confluent_kafka.libversion()[0])
    except Exception as exc:  # pragma: no cover - depends on the environment
        return f"unavailable ({type(exc).__name__})"


def _git_commit() -> str:
    """The checkout's commit, so a result can be traced to the code that produced it."""
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=Path(__file__).resolve().parent,
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
        return out.stdout.strip() or "unknown"
    except OSError:
        return "unknown"


def machine_facts() -> dict[str, Any]:
    """Cores, load, versions and time: what a reader needs to judge a number."""
    return {
        "cores": os.cpu_count(),
        "load_avg_1m": round(os.getloadavg()[0], 2),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "pyspark": _pyspark_version(),
        "librdkafka": _librdkafka_version(),
        "numpy": _numpy_version(),
        "git_commit": _git_commit(),
        "timestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "argv": sys.argv,
    }


def _numpy_version() -> str:
    """numpy's version (the accuracy study is pure numpy)."""
    import numpy

    return str(numpy.__version__)


def write_result(name: str, payload: dict[str, Any], results_dir: Path = RESULTS_DIR) -> Path:
    """Write ``<name>.json`` with the machine facts attached, so no result is anonymous."""
    results_dir.mkdir(parents=True, exist_ok=True)
    path = results_dir / f"{name}.json"
    body = {"machine": machine_facts(), **payload}
    path.write_text(json.dumps(body, indent=2, sort_keys=False) + "\n")
    return path


class PartSkipped(Exception):
    """A benchmark part that cannot run here; the message is the reason the report shows."""
