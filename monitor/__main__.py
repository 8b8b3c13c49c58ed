"""``python -m monitor`` runs the ``nines`` CLI."""

import sys

from monitor.cli import main

sys.exit(main())
