"""One redactor for every line nines prints or logs: secrets never reach a screen or a log file.

A secret can reach the output through any error path (a validation error quoting its input, a
client library echoing a setting, a log line with a URL), so instead of a careful message in each
path, every printed and logged line passes through :func:`redact_text` at the boundary:
the CLI's error printer, the log records, warnings and uncaught exceptions (their hooks are
:mod:`runtime.redaction`'s ``install``) and the demo's screen. What it hides:

- URL credentials of any scheme: ``amqp://user:<redacted>@host`` (the user and host stay: they
  name the fix), a token with no user (``nats://<redacted>@host``), passwords that hold ``@`` or
  ``:`` (everything up to the last ``@`` of the authority is user info), and a scheme-less
  ``user:password@host`` (a Kafka bootstrap written with credentials);
- every secret a setting held (:func:`remember`, :func:`remember_url`): a URL's password is cut
  by the URL's structure where the URL is known (:func:`redact_url`), and wherever else it is
  echoed (a client library's exception, a validation error quoting the input), whatever
  characters it holds: spaces, tabs, quotes or newlines end no pattern here;
- the value of every secret-named key (:data:`SECRET_KEY`: ``sasl.password``, ``password``,
  ``token``, ``ssl.key.password``, ``basic_auth_users`` ...) written as ``'key': value``,
  ``"key": value`` or ``key=value``, at any depth of a dict's repr or JSON;
- a client library's quoted values (librdkafka: ``Invalid value "hunter2" for ...``);
- a whole document quoted back by a validation error (``(got {...})``, ``input_value={...}``).

Pure functions, no I/O and no process hooks: imports only the standard library.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote, unquote

REDACTED = "<redacted>"

#: A key whose value is a secret (matched anywhere in a dotted or underscored name).
SECRET_KEY = re.compile(
    r"pass(?:word|wd|phrase)?|secret|token|credential|private|jaas|bearer|api[_.-]?key"
    r"|ssl[_.]key|key[_.]pem|basic_auth|auth_users|sasl[_.]oauthbearer[_.]config",
    re.IGNORECASE,
)
_KEY_CHARS = r"[\w.\-]*"
_SECRET_KEY_TEXT = rf"{_KEY_CHARS}(?:{SECRET_KEY.pattern}){_KEY_CHARS}"
#: ``scheme://USERINFO@``: USERINFO runs to the last ``@`` before whitespace or a quote (free
#: text says no more; a URL known as such is cut by structure, and its secret remembered).
_URL_USERINFO = re.compile(r"(?i)\b([a-z][\w+.\-]*://)([^\s'\"<>`]*)@")
#: A secret shorter than this is not hidden wherever it occurs (it would blank common words);
#: :func:`redact_url` still cuts it out of its URL by structure.
MIN_REMEMBERED = 4
_remembered: set[str] = set()
_remembered_lock = threading.Lock()
_remembered_pattern: list[re.Pattern[str] | None] = [None]
#: ``user:PASSWORD@host`` without a scheme (a Kafka bootstrap written with credentials).
_BARE_USERINFO = re.compile(r"(?<![\w/:@.\-])([\w.+%\-]+):(?!//)([^\s'\"<>`]*)@(?=[\w\[])")
#: A quoted secret-named key and its value: ``'sasl.password': 'x'``, ``"token": 5``,
#: ``'basic_auth_users': {...}``.
_QUOTED_KEY_VALUE = re.compile(
    rf"""(?ix)
    (?P<key>(?P<q>['"]){_SECRET_KEY_TEXT}(?P=q)\s*[:=]\s*)
    (?P<value>'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"|\{{[^{{}}]*\}}|\[[^\[\]]*\]|[^\s,}}\])]+)
    """
)
#: ``key=value`` with a secret-named key (client settings, JAAS: ``password="x"``).
_ASSIGNED = re.compile(
    rf"""(?ix)(?<![\w.\-])(?P<key>{_SECRET_KEY_TEXT}\s*=\s*)
    (?P<value>'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"|[^\s,;'"]+)"""
)
#: A client library's quoted value (librdkafka: ``Invalid value "hunter2" for ...``).
_QUOTED_VALUE = re.compile(r'(?i)(value\s*)"[^"]*"')
#: A whole mapping quoted back by a validation error.
_WHOLE_DOCUMENT = re.compile(r"\(got \{.*\}\)|input_value=\{.*?\}(?=, input_type)")


def _userinfo(match: re.Match[str]) -> str:
    user, _, password = match.group(2).partition(":")
    if user and password:  # user:password; anything else (a token, ``token:``) is all secret
        return f"{match.group(1)}{user}:{REDACTED}@"
    return f"{match.group(1)}{REDACTED}@"


def _hide_value(match: re.Match[str]) -> str:
    return f"{match.group('key')}{REDACTED}"


def _quoted_forms(text: str) -> set[str]:
    """How ``text`` reads inside a Python repr (either quote) or a JSON string."""
    escaped = text.encode("unicode_escape").decode("ascii")
    return {
        repr(text)[1:-1],
        escaped.replace("'", "\\'"),
        escaped.replace('"', '\\"'),
        json.dumps(text)[1:-1],
        json.dumps(text, ensure_ascii=False)[1:-1],
    }


def remember(secret: str) -> None:
    """Hide ``secret`` (and its percent-decoded form) in every line from now on, wherever it
    occurs: for a value known to be secret that a library or an error may echo."""
    forms: set[str] = set()
    for raw in {secret, unquote(secret)}:
        forms |= {raw, quote(raw, safe=""), *_quoted_forms(raw)}
    with _remembered_lock:
        new = {f for f in forms if len(f) >= MIN_REMEMBERED} - _remembered
        if new:
            _remembered.update(new)
            alternatives = sorted(_remembered, key=len, reverse=True)
            _remembered_pattern[0] = re.compile("|".join(map(re.escape, alternatives)))


def _userinfo_of(url: str) -> tuple[str, str, str, str] | None:
    """``(scheme://, user, secret, rest)`` of a URL with user info, cut by structure: the user
    info is everything between ``://`` and the last ``@`` (a secret may hold any character)."""
    scheme, sep, rest = url.partition("://")
    at = rest.rfind("@")
    if not sep or at < 0 or not re.fullmatch(r"[A-Za-z][\w+.\-]*", scheme.strip()):
        return None
    user, colon, password = rest[:at].partition(":")
    if not (user and colon and password):  # a token, or ``token:``: all of it is secret
        user, password = "", rest[:at]
    return f"{scheme}://", user, password, rest[at + 1 :]


def remember_url(url: str) -> None:
    """Remember the secret of a URL's user info (see :func:`remember`); no-op without one."""
    parts = _userinfo_of(url)
    if parts is not None:
        remember(parts[2])
        if not parts[1]:  # ``token:`` or ``:password`` (no user): the token or password alone
            remember(parts[2].removesuffix(":"))
            remember(parts[2].removeprefix(":"))


def remember_value(value: str) -> None:
    """Remember a resolved secret: a URL's user info only (its host names the fix), else all."""
    if _userinfo_of(value) is not None:
        remember_url(value)
    else:
        remember(value)


def redact_url(url: str) -> str:
    """``url`` with its user info's secret hidden by the URL's structure (whatever characters the
    secret holds: the regex of :func:`redact_text` stops at a space), then redacted as text."""
    parts = _userinfo_of(url)
    if parts is not None:
        head, user, _, rest = parts
        url = f"{head}{user}:{REDACTED}@{rest}" if user else f"{head}{REDACTED}@{rest}"
    return redact_text(url)


def redact_text(text: str) -> str:
    """``text`` with every secret this module knows hidden (see the module docstring)."""
    if not text:
        return text
    remembered = _remembered_pattern[0]
    if remembered is not None:
        text = remembered.sub(REDACTED, text)
    text = _WHOLE_DOCUMENT.sub(
        lambda m: "(got a mapping)" if m.group(0).startswith("(") else "input_value={…}", text
    )
    text = _URL_USERINFO.sub(_userinfo, text)
    text = _BARE_USERINFO.sub(lambda m: f"{m.group(1)}:{REDACTED}@", text)
    text = _QUOTED_KEY_VALUE.sub(_hide_value, text)
    text = _ASSIGNED.sub(_hide_value, text)
    return _QUOTED_VALUE.sub(lambda m: f'{m.group(1)}"{REDACTED}"', text)


def is_secret_key(key: object) -> bool:
    """Whether a setting's name says its value is a secret."""
    return isinstance(key, str) and SECRET_KEY.search(key) is not None


def redact_mapping(value: Any) -> Any:
    """A copy of ``value`` with secret-named keys' values hidden at any depth, strings redacted."""
    if isinstance(value, Mapping):
        return {k: REDACTED if is_secret_key(k) else redact_mapping(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(redact_mapping(v) for v in value)
    if isinstance(value, str):
        return redact_text(value)
    return value
