"""Prometheus' alert templates, parsed as Prometheus parses them: Go's ``text/template``.

Prometheus parses every annotation and label of a rules file when it loads it, and one that does
not parse makes it refuse the whole file, so every alert stops. ``nines alerts`` refuses such a
template itself, naming the objective and the field. This follows Go's ``text/template/parse``
(lexer and parser) of Go 1.23 and later, as Prometheus 3.x is built, with Prometheus' functions
(3.x's, a superset of 2.x's) and its predefined variables (``$labels``, ``$externalLabels``,
``$externalURL``, ``$value``); what is checked is whether it parses, not what it prints. Where
2.x refuses what 3.x takes (``{{else with}}``, Go 1.23; ``urlQueryEscape``, 3.x), the user's own
``promtool`` decides (``monitor.alerts.promtool``): this check refuses nothing that 3.x takes.
``tests/unit/alerts/test_alert_templates.py`` holds it to the real ``promtool`` over generated
templates.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: Go's builtins and Prometheus' template functions (2.x and 3.x; a newer one is accepted, since
#: the server the rules go to may be newer than this list's oldest release: ``urlQueryEscape``
#: is 3.x's).
_FUNCTION_NAMES = (
    "and call html index slice js len not or print printf println urlquery eq ge gt le lt ne "
    "first label value strvalue args reReplaceAll safeHtml match title toUpper toLower "
    "graphLink tableLink sortByLabel humanize humanize1024 humanizeDuration humanizePercentage "
    "humanizeTimestamp toTime toDuration pathPrefix externalURL parseDuration now stripPort "
    "stripDomain query urlQueryEscape"
)
FUNCTIONS = frozenset(_FUNCTION_NAMES.split())
#: What Prometheus puts before an alert's template when it parses it (rulefmt's ``defs``).
PRELUDE = (
    "{{$labels := .Labels}}{{$externalLabels := .ExternalLabels}}"
    "{{$externalURL := .ExternalURL}}{{$value := .Value}}"
)
_KEYWORD_NAMES = "block break continue define else end if range nil template with"
KEYWORDS = frozenset(_KEYWORD_NAMES.split())
SPACE = " \t\r\n"


class TemplateError(ValueError):
    """A template Prometheus would refuse; the message is Go's, as promtool prints it."""


@dataclass(frozen=True)
class Item:
    """One lexeme: its kind (``text``, ``left``, ``right``, ``space``, ``identifier``, ...)."""

    kind: str
    value: str


def _alnum(c: str) -> bool:
    """Go's ``isAlphaNumeric``: ``_``, a letter (category L) or a decimal digit (Nd)."""
    return c == "_" or c.isalpha() or c.isdecimal()


_D = r"[0-9](_?[0-9])*"
_X = r"[0-9a-fA-F](_?[0-9a-fA-F])*"
_GO_INT = re.compile(
    rf"[+-]?(0[xX]_?{_X}|0[oO]_?[0-7](_?[0-7])*|0[bB]_?[01](_?[01])*|0(_?[0-7])*|[1-9](_?[0-9])*)"
)
_GO_FLOAT = re.compile(
    rf"[+-]?(({_D}\.({_D})?|\.{_D})([eE][+-]?{_D})?|{_D}[eE][+-]?{_D}"
    rf"|0[xX](_?{_X}(\.({_X})?)?|\.{_X})[pP][+-]?{_D})"
)


def _number_ok(text: str) -> bool:
    """Go's ``newNumber``: an int, a uint or a float literal (``i``: complex), in range."""
    if text.endswith("i") and _float_ok(text[:-1], imaginary=True):
        return True
    if _GO_INT.fullmatch(text):
        return -(2**63) <= _go_int(text) < 2**64  # else ParseFloat: "integer overflow"
    return bool(_GO_FLOAT.fullmatch(text)) and _float_ok(text)


def _float_ok(text: str, imaginary: bool = False) -> bool:
    """Go's ``strconv.ParseFloat``: a float literal (or, for ``1i``, a decimal) in range."""
    decimal = re.fullmatch(rf"[+-]?{_D}", text) is not None
    if not (_GO_FLOAT.fullmatch(text) or (imaginary and decimal)):
        return False
    plain = text.replace("_", "")
    try:
        value = float.fromhex(plain) if "x" in plain.lower() else float(plain)
    except (ValueError, OverflowError):
        return False
    return abs(value) < float("inf")


def _go_int(text: str) -> int:
    body = text.replace("_", "")
    sign = -1 if body.startswith("-") else 1
    body = body.lstrip("+-")
    low = body.lower()
    if low.startswith(("0x", "0o", "0b")):
        return sign * int(body[2:], {"x": 16, "o": 8, "b": 2}[low[1]])
    if len(body) > 1 and body.startswith("0"):
        return sign * int(body[1:], 8)
    return sign * int(body)


class _Lexer:
    """Go's ``text/template`` lexer with ``{{``/``}}`` and trim markers."""

    def __init__(self, text: str) -> None:
        self.s = text
        self.pos = 0
        self.items: list[Item] = []
        self.depth = 0

    def error(self, message: str) -> TemplateError:
        return TemplateError(message)

    def run(self) -> list[Item]:
        s = self.s
        while True:
            i = s.find("{{", self.pos)
            if i != self.pos:
                self.items.append(Item("text", s[self.pos : i if i >= 0 else len(s)]))
            if i < 0:
                self.items.append(Item("eof", ""))
                return self.items
            self.pos = i + 2
            if s.startswith("-", self.pos) and self.pos + 1 < len(s) and s[self.pos + 1] in SPACE:
                self.pos += 2
            if s.startswith("/*", self.pos):
                self._comment()
                continue
            self.items.append(Item("left", "{{"))
            self.depth = 0
            self._action()

    def _comment(self) -> None:
        end = self.s.find("*/", self.pos + 2)
        if end < 0:
            raise self.error("unclosed comment")
        self.pos = end + 2
        right = self._at_right()
        if not right:
            raise self.error("comment ends before closing delimiter")
        self.pos += right

    def _at_right(self) -> int:
        """Length of the right delimiter (with its trim marker) at ``pos``, else 0."""
        s, p = self.s, self.pos
        if p < len(s) and s[p] in SPACE and s.startswith("-}}", p + 1):
            return 4
        return 2 if s.startswith("}}", p) else 0

    def _at_terminator(self) -> bool:
        if self.pos >= len(self.s):
            return True
        c = self.s[self.pos]
        return c in SPACE or c in ".,|:)(}"

    def _action(self) -> None:
        s = self.s
        while True:
            right = self._at_right()
            if right:
                if self.depth:
                    raise self.error("unclosed left paren")
                self.pos += right
                self.items.append(Item("right", "}}"))
                return
            if self.pos >= len(s):
                raise self.error("unclosed action")
            c = s[self.pos]
            self.pos += 1
            if c in SPACE:
                while self.pos < len(s) and s[self.pos] in SPACE and not self._at_right():
                    self.pos += 1
                self.items.append(Item("space", " "))
            elif c == "=":
                self.items.append(Item("assign", "="))
            elif c == ":":
                if not s.startswith("=", self.pos):
                    raise self.error("expected :=")
                self.pos += 1
                self.items.append(Item("declare", ":="))
            elif c == "|":
                self.items.append(Item("pipe", "|"))
            elif c == '"':
                self._quote('"', "unterminated quoted string", "string")
            elif c == "'":
                self._quote("'", "unterminated character constant", "charconst")
            elif c == "`":
                end = s.find("`", self.pos)
                if end < 0:
                    raise self.error("unterminated raw quoted string")
                self.items.append(Item("rawstring", s[self.pos - 1 : end + 1]))
                self.pos = end + 1
            elif c == "$":
                self._word("variable", self.pos - 1)
            elif c == "." and self.pos < len(s) and not "0" <= s[self.pos] <= "9":
                self._word("field", self.pos - 1)
            elif c in "+-." or ("0" <= c <= "9"):
                self.pos -= 1
                self._number()
            elif _alnum(c):
                self.pos -= 1
                self._identifier()
            elif c == "(":
                self.depth += 1
                self.items.append(Item("(", c))
            elif c == ")":
                self.depth -= 1
                if self.depth < 0:
                    raise self.error(f"unexpected right paren {c!r}")
                self.items.append(Item(")", c))
            elif c.isascii() and c.isprintable():
                self.items.append(Item("char", c))
            else:
                raise self.error(f"unrecognized character in action: {c!r}")

    def _quote(self, quote: str, message: str, kind: str) -> None:
        s, start = self.s, self.pos - 1
        while True:
            if self.pos >= len(s):
                raise self.error(message)
            c = s[self.pos]
            self.pos += 1
            if c == "\\":
                if self.pos >= len(s) or s[self.pos] == "\n":
                    raise self.error(message)
                self.pos += 1
            elif c == "\n":
                raise self.error(message)
            elif c == quote:
                self.items.append(Item(kind, s[start : self.pos]))
                return

    def _word(self, kind: str, start: int) -> None:
        s = self.s
        if self._at_terminator():
            self.items.append(Item(kind, s[start : self.pos]))
            return
        while self.pos < len(s) and _alnum(s[self.pos]):
            self.pos += 1
        if not self._at_terminator():
            raise self.error(f"bad character {s[self.pos]!r}")
        self.items.append(Item(kind, s[start : self.pos]))

    def _identifier(self) -> None:
        s, start = self.s, self.pos
        while self.pos < len(s) and _alnum(s[self.pos]):
            self.pos += 1
        if not self._at_terminator():
            raise self.error(f"bad character {s[self.pos]!r}")
        word = s[start : self.pos]
        if word in KEYWORDS:
            self.items.append(Item(word, word))
        elif word in ("true", "false"):
            self.items.append(Item("bool", word))
        else:
            self.items.append(Item("identifier", word))

    def _scan_number(self) -> bool:
        s = self.s

        def accept(chars: str) -> bool:
            if self.pos < len(s) and s[self.pos] in chars:
                self.pos += 1
                return True
            return False

        def run(chars: str) -> None:
            while accept(chars):
                pass

        accept("+-")
        digits = "0123456789_"
        if accept("0"):
            if accept("xX"):
                digits = "0123456789abcdefABCDEF_"
            elif accept("oO"):
                digits = "01234567_"
            elif accept("bB"):
                digits = "01_"
        run(digits)
        if accept("."):
            run(digits)
        if len(digits) == 11 and accept("eE"):
            accept("+-")
            run("0123456789_")
        if len(digits) == 23 and accept("pP"):
            accept("+-")
            run("0123456789_")
        accept("i")
        if self.pos < len(s) and _alnum(s[self.pos]):
            self.pos += 1
            return False
        return True

    def _number(self) -> None:
        start = self.pos
        if not self._scan_number():
            raise self.error(f"bad number syntax: {self.s[start : self.pos]!r}")
        if self.pos < len(self.s) and self.s[self.pos] in "+-":
            if not self._scan_number() or self.s[self.pos - 1] != "i":
                raise self.error(f"bad number syntax: {self.s[start : self.pos]!r}")
            self.items.append(Item("complex", self.s[start : self.pos]))
            return
        self.items.append(Item("number", self.s[start : self.pos]))


_ESCAPE = re.compile(
    r"""\\(?:[abfnrtv\\'"]|x[0-9a-fA-F]{2}|[0-7]{3}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8})"""
)


def _unquote_ok(token: str) -> bool:
    """Go's ``strconv.Unquote`` of a double-quoted string (``'`` is no escape there)."""
    body = token[1:-1]
    i = 0
    while i < len(body):
        if body[i] == "\\":
            m = _ESCAPE.match(body, i)
            if m is None or m.group() == "\\'":
                return False
            esc = m.group()
            if esc[1] in "uU" and not _rune_ok(int(esc[2:], 16)):
                return False
            if esc[1] in "01234567" and int(esc[1:], 8) > 255:
                return False
            i = m.end()
        else:
            i += 1
    return True


def _rune_ok(code: int) -> bool:
    return code <= 0x10FFFF and not 0xD800 <= code <= 0xDFFF


def _char_ok(token: str) -> bool:
    """Go's ``strconv.UnquoteChar`` of a character constant: exactly one character."""
    body = token[1:-1]
    if not body:
        return False
    if body[0] != "\\":
        return len(body) == 1 and body != "'"
    m = _ESCAPE.match(body)
    if m is None or m.end() != len(body) or m.group() == '\\"':
        return False
    esc = m.group()
    if esc[1] in "uU":
        return _rune_ok(int(esc[2:], 16))
    if esc[1] in "01234567":
        return int(esc[1:], 8) <= 255
    return True


class _Parser:
    """Go's ``text/template/parse`` tree building, keeping only what can fail."""

    def __init__(self, items: list[Item]) -> None:
        self.items = items
        self.i = 0
        self.vars: list[str] = ["$"]
        self.range_depth = 0
        #: Nodes that make a template non-empty (Go's ``IsEmptyTree``): actions, non-blank text.
        self.content = 0
        #: Templates defined so far (``define``, ``block``): name -> non-empty.
        self.defined: dict[str, bool] = {}

    def error(self, message: str) -> TemplateError:
        return TemplateError(message)

    def next(self) -> Item:
        item = self.items[self.i]
        self.i += 1
        return item

    def backup(self) -> None:
        self.i -= 1

    def peek(self) -> Item:
        return self.items[self.i]

    def next_non_space(self) -> Item:
        item = self.next()
        while item.kind == "space":
            item = self.next()
        return item

    def peek_non_space(self) -> Item:
        item = self.next_non_space()
        self.backup()
        return item

    def parse(self) -> None:
        """The top level: text, actions and ``define``s until EOF."""
        while self.peek().kind != "eof":
            if self.peek().kind == "left":
                start = self.i
                self.next()
                if self.next_non_space().kind == "define":
                    self.define()
                    continue
                self.i = start
            end = self.text_or_action()
            if end is not None:
                raise self.error(f"unexpected {{{{{end}}}}}")

    def define(self) -> None:
        name = self._name("define clause")
        self.expect("right", "define clause")
        self._body(name)

    def _name(self, clause: str) -> Item:
        """A define's, block's or template's name: a string constant."""
        name = self.next_non_space()
        if name.kind not in ("string", "rawstring"):
            raise self.error(f"unexpected {name.value!r} in {clause}")
        self._string(name)
        return name

    def _body(self, name: Item) -> None:
        """A define's or block's body up to its {{end}}, parsed with fresh variables and added
        as template ``name``."""
        saved, depth, before = self.vars, self.range_depth, self.content
        self.vars, self.range_depth = ["$"], 0
        end = self.item_list()
        self.vars, self.range_depth = saved, depth
        if end != "end":
            raise self.error(f"unexpected {{{{{end}}}}}")
        self.add(name.value[1:-1], before)
        self.content = before

    def expect(self, kind: str, context: str) -> Item:
        item = self.next_non_space()
        if item.kind != kind:
            raise self.error(f"unexpected {item.value!r} in {context}")
        return item

    def item_list(self) -> str:
        """Nodes until ``{{end}}`` or ``{{else}}`` (which is returned); EOF is an error."""
        while self.peek_non_space().kind != "eof":
            end = self.text_or_action()
            if end is not None:
                return end
        raise self.error("unexpected EOF")

    def text_or_action(self) -> str | None:
        """One node; ``"end"``/``"else"`` when it is that delimiter."""
        item = self.next_non_space()
        if item.kind == "text":
            self.content += bool(item.value.strip())
            return None
        if item.kind != "left":
            raise self.error(f"unexpected {item.value!r} in input")
        end = self.action()
        if end is None:
            self.content += 1
        return end

    def add(self, name: str, before: int) -> None:
        """Go's ``Tree.add``: a second non-empty definition of a name is an error."""
        nonempty = self.content > before
        if self.defined.get(name) and nonempty:
            raise self.error(f'template: multiple definition of template "{name}"')
        if not self.defined.get(name):
            self.defined[name] = nonempty

    def action(self) -> str | None:
        item = self.next_non_space()
        kind = item.kind
        if kind == "block":
            self.block()
        elif kind in ("break", "continue"):
            if not self.range_depth:
                raise self.error(f"{{{{{kind}}}}} outside {{{{range}}}}")
            self.expect("right", f"{{{{{kind}}}}}")
        elif kind == "else":
            return self.else_()
        elif kind == "end":
            self.expect("right", "end")
            return "end"
        elif kind in ("if", "range", "with"):
            self.control(kind)
        elif kind == "template":
            self.template()
        else:
            self.backup()
            self.pipeline("command", "right")
        return None

    def else_(self) -> str:
        """``{{else}}``; ``{{else if}}`` and (Go 1.23) ``{{else with}}`` leave their keyword
        pending for ``control``."""
        following = self.peek_non_space()
        if following.kind in ("if", "with"):
            return f"else-{following.kind}"
        self.expect("right", "else")
        return "else"

    def control(self, kind: str) -> None:
        mark = len(self.vars)
        self.pipeline(kind, "right")
        if kind == "range":
            self.range_depth += 1
        end = self.item_list()
        if kind == "range":
            self.range_depth -= 1
        if end in ("else-if", "else-with"):  # an {{if}}/{{with}} whose {{end}} ends the chain
            chained = end.removeprefix("else-")
            if kind != chained:  # {{else with}} only in a with, {{else if}} only in an if
                raise self.error(f"unexpected <{chained}> in input")
            self.next_non_space()
            self.control(chained)
        elif end == "else":
            end = self.item_list()
            if end != "end":
                raise self.error("expected end; found {{else}}")
        del self.vars[mark:]

    def block(self) -> None:
        name = self._name("block clause")
        self.pipeline("block clause", "right")
        self._body(name)

    def template(self) -> None:
        self._name("template clause")
        if self.next_non_space().kind != "right":
            self.backup()
            self.pipeline("template clause", "right")

    def _string(self, item: Item) -> None:
        if item.kind == "string" and not _unquote_ok(item.value):
            raise self.error("invalid syntax")

    def pipeline(self, context: str, end: str) -> None:
        """Declarations, then commands separated by ``|``, until ``end``."""
        self._declarations(context)
        commands: list[str] = []
        while True:
            item = self.next_non_space()
            if item.kind == end:
                self._check_pipeline(commands, context)
                return
            if item.kind in ("bool", "charconst", "complex", "field", "identifier", "number",
                             "nil", "rawstring", "string", "variable", "("):  # fmt: skip
                self.backup()
                commands.append(self.command())
            else:
                raise self.error(f"unexpected {item.value!r} in {context}")

    def _declarations(self, context: str) -> None:
        """``$x :=``, ``$x =`` and range's ``$i, $e :=``, as Go's ``pipeline`` reads them."""
        count = 0
        while True:
            start = self.i
            variable = self.peek_non_space()
            if variable.kind != "variable":
                return
            self.next_non_space()
            after = self.peek_non_space()
            if after.kind in ("declare", "assign"):
                self.next_non_space()
                self.vars.append(variable.value)
                return
            if after.kind == "char" and after.value == ",":
                self.next_non_space()
                self.vars.append(variable.value)
                count += 1
                if context == "range" and count < 2:
                    if self.peek_non_space().kind in ("variable", "right", ")"):
                        continue
                    raise self.error("range can only initialize variables")
                raise self.error(f"too many declarations in {context}")
            self.i = start  # an argument, not a declaration
            return

    def _check_pipeline(self, commands: list[str], context: str) -> None:
        if not commands:
            raise self.error(f"missing value for {context}")
        for n, first in enumerate(commands[1:], start=2):
            if first in ("bool", "dot", "nil", "number", "string"):
                raise self.error(f"non executable command in pipeline stage {n}")

    def command(self) -> str:
        """One command; the kind of its first operand."""
        first = ""
        while True:
            self.peek_non_space()
            kind = self.operand()
            if kind is not None and not first:
                first = kind
            item = self.next()
            if item.kind == "space":
                continue
            if item.kind in ("right", ")"):
                self.backup()
            elif item.kind != "pipe":
                raise self.error(f"unexpected {item.value!r} in operand")
            break
        if not first:
            raise self.error("empty command")
        return first

    def operand(self) -> str | None:
        kind = self.term()
        if kind is None:
            return None
        if self.peek().kind == "field":
            if kind in ("bool", "string", "number", "nil", "dot"):
                raise self.error("unexpected . after term")
            while self.peek().kind == "field":
                self.next()
            return "chain" if kind != "variable" else kind
        return kind

    def term(self) -> str | None:
        item = self.next_non_space()
        kind = item.kind
        if kind == "identifier":
            if item.value not in FUNCTIONS:
                raise self.error(f'function "{item.value}" not defined')
            return "identifier"
        if kind == "field" and item.value == ".":
            return "dot"
        if kind == "variable":
            name = item.value.split(".")[0]
            if name not in self.vars:
                raise self.error(f'undefined variable "{name}"')
            return "variable"
        if kind in ("field", "bool", "nil", "rawstring"):
            return "string" if kind == "rawstring" else kind
        if kind == "string":
            if not _unquote_ok(item.value):
                raise self.error("invalid syntax")
            return "string"
        if kind == "charconst":
            if not _char_ok(item.value):
                raise self.error(f"malformed character constant: {item.value}")
            return "number"
        if kind in ("number", "complex"):
            if not _number_ok(item.value):
                raise self.error(f"illegal number syntax: {item.value!r}")
            return "number"
        if kind == "(":
            self.pipeline("parenthesized pipeline", ")")
            return "pipe"
        self.backup()
        return None


def template_error(text: str) -> str | None:
    """Why Prometheus would not parse ``text`` as an alert template (None: it parses)."""
    try:
        _Parser(_Lexer(PRELUDE + text).run()).parse()
    except TemplateError as exc:
        return str(exc)
    return None


__all__ = ["FUNCTIONS", "PRELUDE", "TemplateError", "template_error"]
