"""Keycloak, the real OIDC issuer of the OAUTHBEARER tests: its server distribution from Maven
Central, built once, started once per test run over HTTPS on loopback, set up through its admin
REST API.

``start-dev`` repeats Keycloak's build step (75 s of a 4 min start at load 25) on every start:
the distribution is built once with :data:`BUILD_OPTIONS` into the cache and started with
``start --optimized``, HTTPS only, on 127.0.0.1 with a throwaway certificate. Keycloak 26 needs
Java 21 or later: ``$JAVA_HOME`` if it is one, else the newest under ``/usr/lib/jvm``.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import signal
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runtime.maven import cache_dir
from testbroker.ports import LOOPBACK, free_port
from testbroker.tls import TlsError, make_tls

VERSION = "26.5.6"
ARTIFACT = f"org.keycloak:keycloak-quarkus-dist:{VERSION}:zip"
#: Build-time options, fixed in the cached build (``start --optimized`` takes these as built).
BUILD_OPTIONS = ("--db=dev-mem", "--health-enabled=false", "--metrics-enabled=false")
#: The oldest Java Keycloak 26 runs on.
MIN_JAVA = 21
#: A cold start on a loaded 2-core machine: 68 s at load 25 (docs/deploy.md, OIDC).
START_TIMEOUT_S = 600.0
#: The download (165 MB) and the build step, each.
PREPARE_TIMEOUT_S = 900.0
ADMIN_USER = "admin"


class KeycloakError(RuntimeError):
    """Keycloak cannot be fetched, built, started or set up; the message says why in one line."""


def _java_version(home: Path) -> int | None:
    """The feature version in ``home/release`` (``JAVA_VERSION="25.0.1"`` → 25)."""
    try:
        text = (home / "release").read_text()
    except OSError:
        return None
    found = re.search(r'^JAVA_VERSION="(?:1\.)?(\d+)', text, re.M)
    return int(found.group(1)) if found and (home / "bin" / "java").is_file() else None


def java_home() -> Path:
    """A Java 21+ home: ``$JAVA_HOME``'s if new enough, else the newest in /usr/lib/jvm."""
    env = os.environ.get("JAVA_HOME", "").strip()
    candidates = [Path(env)] if env else []
    jvm = Path("/usr/lib/jvm")
    if jvm.is_dir():
        candidates += sorted(p for p in jvm.iterdir() if p.is_dir() and not p.is_symlink())
    found = [(v, p) for p in candidates if (v := _java_version(p)) is not None and v >= MIN_JAVA]
    if not found:
        raise KeycloakError(
            f"Keycloak {VERSION} needs Java {MIN_JAVA}+: none in $JAVA_HOME or /usr/lib/jvm "
            "(install a JDK 21+, e.g. Adoptium's temurin-21-jdk, or set JAVA_HOME to one)"
        )
    return max(found, key=lambda vp: vp[0])[1]


def distribution() -> Path:
    """The Keycloak distribution, fetched (``mvn dependency:copy``) and built once, cached."""
    root = cache_dir() / "keycloak"
    home = root / f"keycloak-{VERSION}"
    if not (home / "bin" / "kc.sh").is_file():
        _fetch(root)
    stamp = home / "nines-build.txt"
    wanted = " ".join(BUILD_OPTIONS)
    if not stamp.is_file() or stamp.read_text().strip() != wanted:
        _run([str(home / "bin" / "kc.sh"), "build", *BUILD_OPTIONS], "kc.sh build")
        stamp.write_text(wanted + "\n")
    return home


def _fetch(root: Path) -> None:
    mvn = shutil.which("mvn")
    if mvn is None:
        raise KeycloakError("mvn is not installed: it fetches Keycloak from Maven Central")
    root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=root) as tmp:
        _run([mvn, "-B", "-q", "dependency:copy", f"-Dartifact={ARTIFACT}",
              f"-DoutputDirectory={tmp}"], "mvn dependency:copy", cwd=tmp)  # fmt: skip
        zips = list(Path(tmp).glob("*.zip"))
        if not zips:
            raise KeycloakError(f"mvn dependency:copy of {ARTIFACT} left no zip")
        with zipfile.ZipFile(zips[0]) as z:
            z.extractall(tmp)
        for script in Path(tmp, f"keycloak-{VERSION}", "bin").glob("*.sh"):
            script.chmod(0o755)
        os.replace(Path(tmp, f"keycloak-{VERSION}"), root / f"keycloak-{VERSION}")


def _env() -> dict[str, str]:
    return {**os.environ, "JAVA_HOME": str(java_home())}


def _run(argv: list[str], what: str, cwd: str | None = None) -> None:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=PREPARE_TIMEOUT_S,
                              check=False, env=_env(), cwd=cwd, preexec_fn=_nice)  # fmt: skip
    except subprocess.TimeoutExpired:
        raise KeycloakError(f"{what} did not finish in {PREPARE_TIMEOUT_S:.0f} s") from None
    if done.returncode != 0:
        lines = [ln for ln in (done.stdout + done.stderr).splitlines() if "ERROR" in ln]
        raise KeycloakError(f"{what}: {lines[0] if lines else f'exit {done.returncode}'}")


def _nice() -> None:
    os.nice(10)


@dataclass(frozen=True)
class OidcClient:
    """A confidential client of the test realm: its id and secret (client credentials)."""

    client_id: str
    secret: str


class Keycloak:
    """One Keycloak on 127.0.0.1 over HTTPS, its files under ``home``."""

    def __init__(self, home: Path) -> None:
        self.home = home
        home.mkdir(parents=True, exist_ok=True)
        try:
            self.tls = make_tls(home / "tls", days=30)
        except TlsError as exc:
            raise KeycloakError(f"Keycloak's certificate: {exc}") from None
        self.port = free_port()
        self.log_path = home / "keycloak.log"
        self._admin_password = secrets.token_urlsafe(18)
        self.proc: subprocess.Popen[bytes] | None = None
        self._context = ssl.create_default_context(cafile=str(self.tls.ca))
        #: Seconds from the process' start to its first answer; CPU seconds by then.
        self.start_s: float | None = None
        self.start_cpu_s: float | None = None

    @property
    def base_url(self) -> str:
        return f"https://{LOOPBACK}:{self.port}"

    def issuer(self, realm: str) -> str:
        return f"{self.base_url}/realms/{realm}"

    def token_url(self, realm: str) -> str:
        return f"{self.issuer(realm)}/protocol/openid-connect/token"

    def jwks_url(self, realm: str) -> str:
        return f"{self.issuer(realm)}/protocol/openid-connect/certs"

    def start(self) -> None:
        """Start the built distribution (returns at once; :meth:`wait_ready` waits)."""
        home = distribution()
        env = {**_env(), "KC_BOOTSTRAP_ADMIN_USERNAME": ADMIN_USER,
               "KC_BOOTSTRAP_ADMIN_PASSWORD": self._admin_password,
               "JAVA_OPTS_KC_HEAP": "-Xms64m -Xmx512m"}  # fmt: skip
        argv = [str(home / "bin" / "kc.sh"), "start", "--optimized", "--http-enabled=false",
                f"--http-host={LOOPBACK}", f"--https-port={self.port}",
                f"--https-certificate-file={self.tls.cert}",
                f"--https-certificate-key-file={self.tls.key}",
                f"--hostname={self.base_url}"]  # fmt: skip
        self._t0 = time.monotonic()
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env,
                                         start_new_session=True, preexec_fn=_nice)  # fmt: skip

    def wait_ready(self, timeout_s: float = START_TIMEOUT_S) -> None:
        """Until the master realm's discovery document answers; KeycloakError if it dies."""
        deadline = time.monotonic() + timeout_s
        url = f"{self.issuer('master')}/.well-known/openid-configuration"
        while True:
            if self.proc is None or self.proc.poll() is not None:
                raise KeycloakError(f"Keycloak exited while starting; see {self.log_path}")
            try:
                with urllib.request.urlopen(url, timeout=5, context=self._context):
                    break
            except (OSError, urllib.error.URLError):
                if time.monotonic() > deadline:
                    raise KeycloakError(
                        f"Keycloak not ready after {timeout_s:.0f} s; see {self.log_path}"
                    ) from None
                time.sleep(0.5)
        if self.start_s is None:
            self.start_s = time.monotonic() - self._t0
            self.start_cpu_s = self.cpu_s()

    def cpu_s(self) -> float:
        """CPU seconds of Keycloak's JVM so far (user + system, from /proc)."""
        total = 0.0
        assert self.proc is not None
        for pid in [self.proc.pid, *_children(self.proc.pid)]:
            try:
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        return total

    def pause(self) -> None:
        """SIGSTOP: the issuer hangs (connections open, nothing answers)."""
        assert self.proc is not None
        os.killpg(self.proc.pid, signal.SIGSTOP)

    def resume(self) -> None:
        assert self.proc is not None
        os.killpg(self.proc.pid, signal.SIGCONT)

    def stop(self) -> None:
        if self.proc is None:
            return
        proc, self.proc = self.proc, None
        try:
            os.killpg(proc.pid, signal.SIGCONT)
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)
        except ProcessLookupError:
            pass

    # the admin REST API

    def _request(self, method: str, url: str, body: Any = None, token: str | None = None,
                 form: dict[str, str] | None = None) -> Any:  # fmt: skip
        headers = {}
        data = None
        if form is not None:
            data = urllib.parse.urlencode(form).encode()
            headers["Content-Type"] = "application/x-www-form-urlencoded"
        elif body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        req = urllib.request.Request(url, data=data, headers=headers, method=method)
        try:
            with urllib.request.urlopen(req, timeout=60, context=self._context) as resp:
                text = resp.read().decode()
        except urllib.error.HTTPError as exc:
            raise KeycloakError(f"{method} {url}: HTTP {exc.code} {exc.read()[:300]!r}") from None
        return json.loads(text) if text.strip() else None

    def admin_token(self) -> str:
        answer = self._request(
            "POST",
            f"{self.issuer('master')}/protocol/openid-connect/token",
            form={"grant_type": "password", "client_id": "admin-cli", "username": ADMIN_USER,
                  "password": self._admin_password},
        )  # fmt: skip
        return str(answer["access_token"])

    def add_realm(self, realm: str, token_lifespan_s: int) -> None:
        """A realm whose access tokens live ``token_lifespan_s``, that records token requests."""
        self._request("POST", f"{self.base_url}/admin/realms", token=self.admin_token(), body={
            "realm": realm, "enabled": True, "accessTokenLifespan": token_lifespan_s,
            "eventsEnabled": True, "enabledEventTypes": ["CLIENT_LOGIN", "CLIENT_LOGIN_ERROR"],
            "eventsExpiration": 3600,
        })  # fmt: skip

    def add_client(
        self, realm: str, client_id: str, audience: str | None, lifespan_s: int | None = None
    ) -> OidcClient:
        """A confidential client with service accounts (client credentials); its tokens carry
        ``audience`` in ``aud`` (an audience mapper), or only Keycloak's own when None, and live
        ``lifespan_s`` (the realm's when None)."""
        secret = secrets.token_urlsafe(24)
        mappers = [] if audience is None else [{
            "name": f"audience-{audience}", "protocol": "openid-connect",
            "protocolMapper": "oidc-audience-mapper",
            "config": {"included.custom.audience": audience, "access.token.claim": "true",
                       "id.token.claim": "false"},
        }]  # fmt: skip
        self._request("POST", f"{self.base_url}/admin/realms/{realm}/clients",
                      token=self.admin_token(), body={
            "clientId": client_id, "enabled": True, "protocol": "openid-connect",
            "publicClient": False, "serviceAccountsEnabled": True,
            "standardFlowEnabled": False, "directAccessGrantsEnabled": False,
            "clientAuthenticatorType": "client-secret", "secret": secret,
            "protocolMappers": mappers,
            "attributes": {} if lifespan_s is None else {
                "access.token.lifespan": str(lifespan_s)},
        })  # fmt: skip
        return OidcClient(client_id, secret)

    def token_requests(self, realm: str, client_id: str) -> list[float]:
        """When ``client_id`` was given a token (CLIENT_LOGIN events), seconds since the epoch."""
        query = urllib.parse.urlencode({"client": client_id, "type": "CLIENT_LOGIN", "max": 10000})
        events = self._request(
            "GET", f"{self.base_url}/admin/realms/{realm}/events?{query}", token=self.admin_token()
        )
        return sorted(e["time"] / 1000 for e in events)

    def client_token(self, realm: str, client: OidcClient) -> dict[str, Any]:
        """A client credentials grant, as a Kafka client makes it."""
        answer = self._request("POST", self.token_url(realm), form={
            "grant_type": "client_credentials", "client_id": client.client_id,
            "client_secret": client.secret})  # fmt: skip
        return dict(answer)


def _children(pid: int) -> list[int]:
    try:
        found = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return []
    kids = [int(p) for p in found]
    return kids + [g for k in kids for g in _children(k)]


__all__ = ["BUILD_OPTIONS", "VERSION", "Keycloak", "KeycloakError", "OidcClient", "java_home"]
