"""SIGINT as a terminal gives it, for the processes the tests and benches start.

A process started in the background by a non-interactive shell (``make test``'s side runs, a CI
script started with ``&`` or ``nohup``) has SIGINT ignored, and an ignored signal stays ignored
across fork and exec: a child that a test stops with SIGINT (Ctrl+C's signal) would not hear it
before it installs a handler of its own (a probe signalled while starting ran on, CI-like run
of 2026-12-07), and a pytest would never tear its fixtures down.
"""

from __future__ import annotations

import signal


def default_sigint() -> None:
    """A ``preexec_fn`` (or a forked child's first step): SIGINT's default action, as in a
    process a terminal starts; Python then installs its Ctrl+C handler at start-up."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


__all__ = ["default_sigint"]
