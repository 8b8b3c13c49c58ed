"""Keycloak, the OIDC issuer of the OAUTHBEARER tests, started in the background at collection.

Its start (68 s at load 25 from the cached build; a fresh machine first fetches 165 MB and
runs the build step, about 2.5 min more) overlaps the rest of the suite: the tests that need it
run just before the ones waiting for Go builds, and the wait, with the realm's setup, is a step
of its own before the first of them, outside pytest-timeout's timer (as
``tests/background_builds.py`` does for builds). The outcome is kept; the ``oidc_issuer``
fixture reports a failure in one line (a skip outside CI, a failure under ``CI=true``).
"""

from __future__ import annotations

import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from testkit.keycloak import Keycloak, KeycloakError, OidcClient

#: The fixture that needs Keycloak (``tests/conftest.py``); a test that uses it runs late.
FIXTURE = "oidc_issuer"
#: The test realm's access tokens live 60 s: librdkafka refreshes at 80 %, every 48 s.
TOKEN_LIFESPAN_S = 60
#: The audience Kafka expects (``sasl.oauthbearer.expected.audience``).
AUDIENCE = "kafka"
REALM, OTHER_REALM = "nines", "elsewhere"
#: The issuer-outage test's tokens: refreshed at 16 s, expired at 20 s.
SHORT_LIFESPAN_S = 20
WAIT_TIMEOUT_S = 1800.0


@dataclass(frozen=True)
class Issuer:
    """The running Keycloak and what the tests use of it."""

    keycloak: Keycloak
    realm: str
    #: Tokens for ``kafka`` (the audience), 60 s.
    client: OidcClient
    #: Tokens without the ``kafka`` audience: Kafka refuses them.
    no_audience: OidcClient
    #: A client of another realm: another issuer (and signing key) than Kafka expects.
    other_issuer: OidcClient
    #: Tokens for ``kafka`` that live SHORT_LIFESPAN_S: the issuer-outage test.
    short_lived: OidcClient
    #: Seconds to its first answer, and its CPU seconds by then (start cost).
    start_s: float
    start_cpu_s: float


class _Background:
    """The start, on a thread: fetch and build if needed, start, wait, set the realms up."""

    def __init__(self) -> None:
        self.issuer: Issuer | None = None
        self.error: str | None = None
        self.keycloak: Keycloak | None = None
        self._thread = threading.Thread(target=self._run, name="keycloak", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            t0 = time.monotonic()
            home = Path(tempfile.mkdtemp(prefix="nines-keycloak-"))
            self.keycloak = kc = Keycloak(home)
            kc.start()
            kc.wait_ready()
            kc.add_realm(REALM, TOKEN_LIFESPAN_S)
            kc.add_realm(OTHER_REALM, TOKEN_LIFESPAN_S)
            self.issuer = Issuer(
                kc,
                REALM,
                kc.add_client(REALM, "nines-probe", AUDIENCE),
                kc.add_client(REALM, "nines-no-audience", None),
                kc.add_client(OTHER_REALM, "nines-elsewhere", AUDIENCE),
                kc.add_client(REALM, "nines-short", AUDIENCE, SHORT_LIFESPAN_S),
                kc.start_s or 0.0,
                kc.start_cpu_s or 0.0,
            )
            print(
                f"\nKeycloak ready in {time.monotonic() - t0:.0f} s (its start "
                f"{kc.start_s:.0f} s, {kc.start_cpu_s:.0f} CPU-s; log {kc.log_path})",
                flush=True,
            )
        except (KeycloakError, OSError) as exc:
            self.error = str(exc)

    def wait(self, timeout_s: float) -> None:
        self._thread.join(timeout_s)
        if self._thread.is_alive() and self.error is None:
            self.error = f"Keycloak not ready after {timeout_s:.0f} s"

    def stop(self) -> None:
        if self.keycloak is not None:
            self.keycloak.stop()


_started: list[_Background] = []


def needs(item: pytest.Item) -> bool:
    return FIXTURE in getattr(item, "fixturenames", ())


def order_and_start(items: list[pytest.Item], config: pytest.Config, later: int) -> bool:
    """Move the tests that need Keycloak just before the last ``later`` items (those waiting
    for builds) and start it; whether it was started."""
    head, tail = items[: len(items) - later], items[len(items) - later :]
    kc = [item for item in head if needs(item)]
    if not kc:
        return False
    items[:] = [item for item in head if not needs(item)] + kc + tail
    _started.append(_Background())
    config.pluginmanager.register(_WaitPlugin(), "nines-keycloak-wait")
    return True


def issuer() -> Issuer:
    """The started issuer, or KeycloakError with why not."""
    if not _started:
        raise KeycloakError("Keycloak was not started at collection")
    bg = _started[0]
    bg.wait(WAIT_TIMEOUT_S)
    if bg.issuer is None:
        raise KeycloakError(bg.error or "Keycloak did not start")
    return bg.issuer


def stop() -> None:
    for bg in _started:
        bg.stop()


class _WaitPlugin:
    waited = False

    @pytest.hookimpl(hookwrapper=True, tryfirst=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> Iterator[None]:
        """The wait, outside pytest-timeout's timer (this wrapper runs first)."""
        if needs(item) and not self.waited:
            self.waited = True
            bg = _started[0]
            if bg.issuer is None and bg.error is None:
                reporter = item.config.pluginmanager.get_plugin("terminalreporter")
                if reporter is not None:
                    reporter.write_line("\nwaiting for Keycloak to start")
            bg.wait(WAIT_TIMEOUT_S)
        yield


__all__ = ["AUDIENCE", "FIXTURE", "Issuer", "issuer", "needs", "order_and_start", "stop"]
