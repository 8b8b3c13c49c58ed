"""``python -m monitor`` runs the ``nines`` CLI."""

import sys

from runtime import quiet_stop

# Before the imports, which take seconds on a busy host: a SIGTERM or SIGINT then ends the
# start-up with exit 0 and no traceback (each long-running command installs its own later).
quiet_stop.install()
try:
    from monitor.cli import run

    run()
except SystemExit:
    raise
except BaseException:
    if not quiet_stop.requested():
        raise
    sys.exit(0)
