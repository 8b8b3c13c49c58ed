"""``raise_open_files_limit`` lifts the soft RLIMIT_NOFILE to the hard one, as Go's runtime does,
in a process started under a low soft limit (its own, so this test's limit is untouched)."""

from __future__ import annotations

import resource
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
CHECK = (
    "import resource; from runtime.fdlimit import raise_open_files_limit as r; "
    "got = r(); print(got, *resource.getrlimit(resource.RLIMIT_NOFILE))"
)


def test_the_soft_open_file_limit_is_raised_to_the_hard_one() -> None:
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]

    def low() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (64, hard))

    out = subprocess.run(
        [sys.executable, "-c", CHECK], capture_output=True, text=True, cwd=ROOT,
        preexec_fn=low, timeout=60, check=True,
    )  # fmt: skip
    got, soft_after, hard_after = (int(v) for v in out.stdout.split())
    assert (got, soft_after, hard_after) == (hard, hard, hard)
