"""One redactor for every line nines prints or logs: secrets never reach a screen or a log file.

A secret can reach the output through any error path (a validation error quoting its input, a
client library echoing a setting, a log line with a URL), so instead of a careful message in each
path, every printed and logged line passes through :func:`redact_text` at the boundary:
the CLI's error printer, the log records (:func:`install`), warnings, uncaught exceptions and the
demo's screen. What it hides:

- URL credentials of any scheme: ``amqp://user:<redacted>@host`` (the user and host stay: they
  name the fix), a token with no user (``nats://<redacted>@host``), passwords that hold ``@`` or
  ``:`` (everything up to the last ``@`` of the authority is user info), and a scheme-less
  ``user:password@host`` (a Kafka bootstrap written with credentials);
- the value of every secret-named key (:data:`SECRET_KEY`: ``sasl.password``, ``password``,
  ``token``, ``ssl.key.password``, ``basic_auth_users`` ...) written as ``'key': value``,
  ``"key": value`` or ``key=value``, at any depth of a dict's repr or JSON;
- a client library's quoted values (librdkafka: ``Invalid value "hunter2" for ...``);
- a whole document quoted back by a validation error (``(got {...})``, ``input_value={...}``).

Pure functions, no I/O: imports only the standard library.
"""

from __future__ import annotations

import logging
import re
import sys
import threading
import traceback
import warnings
from collections.abc import Callable, Mapping
from typing import Any

REDACTED = "<redacted>"

#: A key whose value is a secret (matched anywhere in a dotted or underscored name).
SECRET_KEY = re.compile(
    r"pass(?:word|wd|phrase)?|secret|token|credential|private|jaas|bearer|api[_.-]?key"
    r"|ssl[_.]key|key[_.]pem|basic_auth|auth_users|sasl[_.]oauthbearer[_.]config",
    re.IGNORECASE,
)
_KEY_CHARS = r"[\w.\-]*"
_SECRET_KEY_TEXT = rf"{_KEY_CHARS}(?:{SECRET_KEY.pattern}){_KEY_CHARS}"
#: ``scheme://USERINFO@``: USERINFO runs to the last ``@`` before whitespace or a quote.
_URL_USERINFO = re.compile(r"(?i)\b([a-z][\w+.\-]*://)([^\s'\"<>`]*)@")
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


def redact_text(text: str) -> str:
    """``text`` with every secret this module knows hidden (see the module docstring)."""
    if not text:
        return text
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


class RedactingRecord(logging.LogRecord):
    """A log record whose message, exception and stack text are redacted (whatever the handler)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.exc_info and self.exc_info[0] is not None:
            # formatters use a set exc_text as is: the traceback is redacted once, here
            self.exc_text = redact_text("".join(traceback.format_exception(*self.exc_info)))
            self.exc_text = self.exc_text.rstrip("\n")
        if self.stack_info:
            self.stack_info = redact_text(self.stack_info)

    def getMessage(self) -> str:
        """The formatted message, redacted."""
        return redact_text(super().getMessage())


class RedactingFilter(logging.Filter):
    """For handlers of records made elsewhere: redacts the message in place."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Replace the record's message with its redacted text."""
        if not isinstance(record, RedactingRecord):
            record.msg, record.args = redact_text(record.getMessage()), None
        return True


_once = threading.Lock()
_hooks: list[bool] = []


def _redacting_formatwarning(original: Callable[..., str]) -> Callable[..., str]:
    def formatwarning(*args: Any, **kwargs: Any) -> str:
        return redact_text(original(*args, **kwargs))

    return formatwarning


def _excepthook(kind: type[BaseException], exc: BaseException, tb: Any) -> None:
    sys.stderr.write(redact_text("".join(traceback.format_exception(kind, exc, tb))))


def _thread_excepthook(args: threading.ExceptHookArgs) -> None:
    if args.exc_type is SystemExit:
        return
    name = args.thread.name if args.thread else "?"
    text = "".join(traceback.format_exception(args.exc_type, args.exc_value, args.exc_traceback))
    sys.stderr.write(redact_text(f"Exception in thread {name}:\n{text}"))


def install() -> None:
    """Route every log record, warning and uncaught traceback of this process through the
    redactor: records are made redacted whatever handler a stage configures later, and the root
    logger's handlers get a :class:`RedactingFilter` too. Idempotent."""
    with _once:
        if not _hooks:
            _hooks.append(True)
            logging.setLogRecordFactory(RedactingRecord)
            warnings.formatwarning = _redacting_formatwarning(warnings.formatwarning)
            sys.excepthook = _excepthook
            threading.excepthook = _thread_excepthook
    for handler in logging.getLogger().handlers:
        if not any(isinstance(f, RedactingFilter) for f in handler.filters):
            handler.addFilter(RedactingFilter())
