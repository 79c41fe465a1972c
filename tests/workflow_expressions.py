"""The subset of GitHub's expression language the example workflows use, evaluated, and a workflow's jobs run
through in `needs` order, so a test can say which events reach which job, with which values
(tests/unit/test_examples.py)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any


class Expression:
    """Evaluates the subset of GitHub's expression language the examples' `if:` conditions use: property
    paths, string and boolean literals, ! == != && || and parentheses, contains, startsWith, fromJSON.
    As on GitHub, a missing property is null and string comparison ignores case. The status functions
    (success(), always(), ...) are given by the caller, who knows the jobs' results. Anything else fails."""

    TOKEN = re.compile(r"\s*(?:(\|\||&&|==|!=|[!().,])|'((?:[^']|'')*)'|([A-Za-z_][\w-]*))")

    def __init__(self, source: str) -> None:
        source = source.strip()
        if source.startswith("${{") and source.endswith("}}"):
            source = source[3:-2]
        self.tokens: list[tuple[str, Any]] = []
        self.pos, self.context = 0, {}
        self.functions: Mapping[str, Callable[[], bool]] = {}
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

    def evaluate(self, context: dict[str, Any], functions: Mapping[str, Callable[[], bool]] | None = None) -> Any:
        self.pos, self.context, self.functions = 0, context, functions or {}
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
            if text in self.functions:
                assert not args, f"{text}() takes no arguments"
                return self.functions[text]()
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


STATUS_FUNCTION = re.compile(r"\b(success|failure|always|cancelled)\s*\(")
EMBEDDED = re.compile(r"\$\{\{(.*?)\}\}", re.S)


def interpolate(text: str, context: dict[str, Any]) -> str:
    """A string with `${{ ... }}` in it, as the runner renders it (null is the empty string)."""

    def value(match: re.Match[str]) -> str:
        result = Expression(match.group(1)).evaluate(context)
        return "" if result is None else str(result).lower() if isinstance(result, bool) else str(result)

    return EMBEDDED.sub(value, text)


@dataclass
class JobRun:
    result: str  # success, failure, cancelled or skipped, as in `needs.<job>.result`
    outputs: dict[str, str] = field(default_factory=dict)

    @property
    def ran(self) -> bool:
        return self.result != "skipped"


def needs_of(job: dict[str, Any]) -> list[str]:
    needs = job.get("needs") or []
    return [needs] if isinstance(needs, str) else list(needs)


def status_functions(results_of_needs: list[str]) -> dict[str, Callable[[], bool]]:
    """success() and failure() over the needed jobs' results; the run itself is never cancelled here."""
    return {
        "success": lambda: all(r == "success" for r in results_of_needs),
        "failure": lambda: any(r == "failure" for r in results_of_needs),
        "always": lambda: True,
        "cancelled": lambda: False,
    }


def run_jobs(
    workflow: dict[str, Any],
    github: dict[str, Any],
    results: Mapping[str, str] | None = None,
    step_outputs: Mapping[str, Mapping[str, str]] | None = None,
) -> dict[str, JobRun]:
    """Which jobs of `workflow` run for the event in `github`, and their outputs, in `needs` order. A job that
    runs ends with `results[name]` (default success). As on GitHub, a condition without a status function is
    `success() && (...)`: a job whose needs did not all succeed is skipped unless its condition says otherwise.
    Outputs that come from steps (`steps.*`) are empty unless `step_outputs[job]` gives them (the action's, as a
    run would set them). The `inputs` context is a workflow_dispatch event's inputs."""
    jobs: dict[str, dict[str, Any]] = workflow["jobs"]
    done: dict[str, JobRun] = {}
    while len(done) < len(jobs):
        ready = [n for n, j in jobs.items() if n not in done and all(d in done for d in needs_of(j))]
        assert ready, f"the needs of {sorted(set(jobs) - set(done))} form a cycle or name no job"
        for name in ready:
            job = jobs[name]
            needed = {d: done[d] for d in needs_of(job)}
            context = {
                "github": github,
                "inputs": (github.get("event") or {}).get("inputs"),
                "needs": {d: {"result": r.result, "outputs": r.outputs} for d, r in needed.items()},
            }
            results_of_needs = [r.result for r in needed.values()]
            functions = status_functions(results_of_needs)
            condition = str(job.get("if", "")).strip()
            if condition.startswith("${{") and condition.endswith("}}"):
                condition = condition[3:-2]
            if not STATUS_FUNCTION.search(condition):
                condition = f"success() && ({condition})" if condition else "success()"
            if not truthy(Expression(condition).evaluate(context, functions)):
                done[name] = JobRun("skipped")
                continue
            given = dict((step_outputs or {}).get(name, {}))
            steps = {step["id"]: {"outputs": given} for step in job.get("steps", []) if "id" in step}
            with_steps = {**context, "steps": steps}
            outputs = {key: interpolate(str(value), with_steps) for key, value in (job.get("outputs") or {}).items()}
            done[name] = JobRun((results or {}).get(name, "success"), outputs)
    return done
