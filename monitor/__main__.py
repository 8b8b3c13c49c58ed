"""``python -m monitor`` runs the ``nines`` CLI."""

import signal
import sys


def _stop(_signum: int, _frame: object) -> None:
    raise SystemExit(0)


# Before the imports, which take seconds on a busy host: a SIGTERM or SIGINT then ends the
# start-up with exit 0 and no traceback (each long-running command installs its own later).
for _sig in (signal.SIGTERM, signal.SIGINT):
    signal.signal(_sig, _stop)

from monitor.cli import main  # noqa: E402

sys.exit(main())
