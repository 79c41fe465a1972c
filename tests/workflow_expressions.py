"""The subset of GitHub's expression language the example workflows' `if:` conditions use, evaluated, so a
test can say which events a job runs for (tests/unit/test_examples.py)."""

from __future__ import annotations

import json
import re
from typing import Any


class Expression:
    """Evaluates the subset of GitHub's expression language the examples' `if:` conditions use: property
    paths, string and boolean literals, ! == != && || and parentheses, contains, startsWith, fromJSON.
    As on GitHub, a missing property is null and string comparison ignores case. Anything else fails."""

    TOKEN = re.compile(r"\s*(?:(\|\||&&|==|!=|[!().,])|'((?:[^']|'')*)'|([A-Za-z_][\w-]*))")

    def __init__(self, source: str) -> None:
        source = source.strip()
        if source.startswith("${{") and source.endswith("}}"):
            source = source[3:-2]
        self.tokens: list[tuple[str, Any]] = []
        self.pos, self.context = 0, {}
        pos = 0
        while pos < len(source.rstrip()):
            match = self.TOKEN.match(source, pos)
            assert match, f"cannot read the expression at {source[pos:]!r}"
            op, string, name = match.groups()
            if op:
                self.tokens.append(("op", op))
            elif string is not None:
                self.tokens.append(("value", string.replace("''", "'")))
            else:
                self.tokens.append(("name", name))
            pos = match.end()

    def evaluate(self, context: dict[str, Any]) -> Any:
        self.pos, self.context = 0, context
        value = self._or()
        assert self.pos == len(self.tokens), "trailing tokens"
        return value

    def _peek(self) -> tuple[str, Any] | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def _take(self, op: str) -> bool:
        if self._peek() == ("op", op):
            self.pos += 1
            return True
        return False

    def _or(self) -> Any:
        value = self._and()
        while self._take("||"):
            right = self._and()
            value = value if truthy(value) else right
        return value

    def _and(self) -> Any:
        value = self._comparison()
        while self._take("&&"):
            right = self._comparison()
            value = right if truthy(value) else value
        return value

    def _comparison(self) -> Any:
        left = self._unary()
        for op in ("==", "!="):
            if self._take(op):
                same = equal(left, self._unary())
                return same if op == "==" else not same
        return left

    def _unary(self) -> Any:
        if self._take("!"):
            return not truthy(self._unary())
        return self._primary()

    def _primary(self) -> Any:
        token = self._peek()
        assert token is not None, "unexpected end of expression"
        self.pos += 1
        kind, text = token
        if (kind, text) == ("op", "("):
            value = self._or()
            assert self._take(")")
            return value
        if kind == "value":
            return text
        assert kind == "name", f"unexpected {text!r}"
        if text in ("true", "false", "null"):
            return {"true": True, "false": False, "null": None}[text]
        if self._take("("):
            args = [] if self._take(")") else self._arguments()
            return call(text, args)
        value: Any = self.context.get(text)
        while self._take("."):
            kind, key = self.tokens[self.pos]
            assert kind == "name", f"unexpected {key!r} after ."
            self.pos += 1
            value = value.get(key) if isinstance(value, dict) else None
        return value

    def _arguments(self) -> list[Any]:
        args = [self._or()]
        while self._take(","):
            args.append(self._or())
        assert self._take(")")
        return args


def truthy(value: Any) -> bool:
    return value not in (None, False, 0, "")


def equal(left: Any, right: Any) -> bool:
    if isinstance(left, str) and isinstance(right, str):
        return left.casefold() == right.casefold()
    return bool(left == right)


def call(name: str, args: list[Any]) -> Any:
    if name == "fromJSON":
        return json.loads(args[0])
    if name == "contains":
        haystack, needle = args
        if isinstance(haystack, list):
            return any(equal(item, needle) for item in haystack)
        return str(needle).casefold() in str(haystack).casefold()
    if name == "startsWith":
        return str(args[0]).casefold().startswith(str(args[1]).casefold())
    raise AssertionError(f"function {name} is not supported by this test's evaluator")
