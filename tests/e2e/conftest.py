"""Fixtures for the end-to-end tests (helpers live in e2e_servers.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from e2e_servers import Webhook


@pytest.fixture
def webhook() -> Iterator[Webhook]:
    """An Alertmanager webhook receiver recording every notification."""
    hook = Webhook()
    yield hook
    hook.close()
