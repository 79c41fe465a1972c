"""Turn pydantic's validation errors into lines a user can act on: a dotted path, plain words, a did-you-mean.

pydantic reports `('lora_target_modules', 'list[str]', 1)` and "Input should be a valid string"; a user
needs `lora_target_modules: expected a list of strings or 'all-linear', got ['q_proj', 1]`. The loc is walked
against the model it came from, so union-branch labels are told apart from the user's own keys.
"""

from __future__ import annotations

import datetime
import difflib
import re
import types
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel
from pydantic_core import ErrorDetails

KeyPath = tuple[str | int, ...]
LineOf = Callable[[KeyPath], int | None]
#: (path, message) -> where a value without a line came from, e.g. "from --set max_steps=5"; None: unknown.
OriginOf = Callable[[KeyPath, str], str | None]

#: Problems described one by one; past these, one line counts the rest. A config file holds thousands of
#: unknown keys at most: each would cost a did-you-mean and a line lookup, and nobody reads such a list.
MAX_LISTED = 50
_MORE = "... and "

#: pydantic error type -> what the value should have been.
_EXPECTED = {
    "int_type": "an integer",
    "int_parsing": "an integer",
    "int_from_float": "a whole number",
    "float_type": "a number",
    "float_parsing": "a number",
    "finite_number": "a finite number",
    "bool_type": "true or false",
    "bool_parsing": "true or false",
    "string_type": "a string",
    "list_type": "a list",
    "dict_type": "a mapping of keys",
    "model_type": "a mapping of keys",
    "model_attributes_type": "a mapping of keys",
}
_BOUNDS = {"greater_than": ">", "greater_than_equal": ">=", "less_than": "<", "less_than_equal": "<="}
_BOUND_CTX = {"greater_than": "gt", "greater_than_equal": "ge", "less_than": "lt", "less_than_equal": "le"}
#: pydantic's labels for union branches, in words.
_BRANCH_WORDS = {
    "constrained-int": "an integer",
    "int": "an integer",
    "float": "a number",
    "str": "a string",
    "bool": "true or false",
    "list[str]": "a list of strings",
}


def did_you_mean(word: object, options: Sequence[str]) -> str | None:
    """The closest option to a misspelt word (case-insensitive), or None."""
    if not isinstance(word, str):
        return None
    lowered = {option.lower(): option for option in options}
    match = difflib.get_close_matches(word.lower(), list(lowered), n=1, cutoff=0.6)
    return lowered[match[0]] if match else None


def show(value: object, limit: int = 60) -> str:
    """A value as the user wrote it in YAML, shortened."""
    if value is None:
        text = "null"
    elif isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, datetime.date):
        text = value.isoformat()
    else:
        try:
            text = repr(value)
        except RecursionError:
            text = "(a deeply nested value)"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def dotted(path: KeyPath) -> str:
    return ".".join(str(part) for part in path)


def unknown_key(path: KeyPath, options: Sequence[str], elsewhere: Mapping[str, Sequence[str]] | None = None) -> str:
    """`unknown key `lerning_rate` — did you mean `learning_rate`?` (or where the key does apply). A nested
    suggestion keeps its block (`profiler.enabled`): it is what the user writes in `--set`, and findable."""
    leaf, block = path[-1], path[:-1]
    head = f"unknown key `{dotted(path)}`"
    if isinstance(leaf, str) and elsewhere and leaf in elsewhere:
        return f"{head} — it applies to training_type {', '.join(elsewhere[leaf])} only"
    match = did_you_mean(leaf, options)
    if match is not None:
        return f"{head} — did you mean `{dotted((*block, match))}`?"
    if len(options) <= 12:
        where = f"under `{dotted(block)}`" if block else "here"
        return f"{head} — valid keys {where}: {', '.join(options)}"
    return head


def describe_errors(
    errors: Sequence[ErrorDetails],
    root: type[BaseModel],
    *,
    line_of: LineOf | None = None,
    origin_of: OriginOf | None = None,
    elsewhere: Mapping[str, Sequence[str]] | None = None,
) -> list[str]:
    """One line per pydantic error (loc relative to `root`), led by its dotted path; the errors of one
    value against the branches of a union collapse into one line.

    `elsewhere` maps top-level keys of other training types to those types, for a better hint than a
    did-you-mean; `line_of` finds the source line of a path (None where there is no file, or no such key);
    where there is no line, `origin_of` may name where the value came from instead (`from --set a.b=1`).
    Past MAX_LISTED errors, the rest are counted in one last line (more_problems).
    """
    rest = len(errors) - MAX_LISTED
    errors = errors[:MAX_LISTED]
    lines: list[tuple[KeyPath, str]] = []
    branches: dict[KeyPath, list[tuple[ErrorDetails, KeyPath, str]]] = {}
    for err in errors:
        path, owner, branch = _walk(err, root)
        if branch is None:
            lines.append((path, _line(err, path, owner, elsewhere if len(path) == 1 else None)))
        else:
            group, label = branch
            branches.setdefault(group, []).append((err, path, label))
    for group, errs in branches.items():
        lines.append((group, f"{dotted(group)}: {_union_message(group, errs)}"))
    rendered = []
    for path, text in lines:
        line = line_of(path) if line_of is not None and path else None
        origin = origin_of(path, text) if origin_of is not None and line is None else None
        suffix = f" (line {line})" if line is not None else f" ({origin})" if origin is not None else ""
        rendered.append((line, text + suffix))
    # File order reads best; problems with no line (a missing key, a cross-field rule) come last.
    rendered.sort(key=lambda item: item[0] if item[0] is not None else 1 << 30)
    return [text for _, text in rendered] + more_problems(rest)


def more_problems(rest: int) -> list[str]:
    """The line that closes a truncated list, or none."""
    return [f"{_MORE}{rest:,} more (the first {MAX_LISTED} are listed)"] if rest > 0 else []


def count(lines: Sequence[str]) -> str:
    """'3 problems', or 'more than 50 problems' for a list that more_problems closed."""
    if num_listed(lines) < len(lines):
        return f"more than {num_listed(lines)} problems"
    return f"{len(lines)} problem{'s' if len(lines) != 1 else ''}"


def num_listed(lines: Sequence[str]) -> int:
    """How many of the lines are problems (not the line that counts the rest)."""
    return len(lines) - 1 if lines and lines[-1].startswith(_MORE) else len(lines)


def _walk(err: ErrorDetails, root: type[BaseModel]) -> tuple[KeyPath, type[BaseModel], tuple[KeyPath, str] | None]:
    """Split pydantic's loc into the user's path, the model that owns its last key, and the first union
    branch label met (with the path it belongs to), if any."""
    path: list[str | int] = []
    model: type[BaseModel] | None = root
    owner = root
    branch: tuple[KeyPath, str] | None = None
    loc = err["loc"]
    for index, part in enumerate(loc):
        is_last = index == len(loc) - 1
        if isinstance(part, int):
            path.append(part)
        elif model is not None and part in model.model_fields:
            owner = model
            path.append(part)
            model = _nested_model(model.model_fields[part].annotation)
        elif is_last and err["type"] == "extra_forbidden" and model is not None:
            owner = model
            path.append(part)
        elif branch is None:
            branch = (tuple(path), part)
    return tuple(path), owner, branch


def _nested_model(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if get_origin(annotation) in (Union, types.UnionType):
        for arg in get_args(annotation):
            found = _nested_model(arg)
            if found is not None:
                return found
    return None


def _line(
    err: ErrorDetails, path: KeyPath, owner: type[BaseModel], elsewhere: Mapping[str, Sequence[str]] | None
) -> str:
    kind = err["type"]
    if kind == "extra_forbidden":
        return unknown_key(path, list(owner.model_fields), elsewhere)
    if kind == "invalid_key":
        where = f"{dotted(path[:-1])}: " if path[:-1] else ""
        return f"{where}key {show(err['input'])} is not a name (keys are words like max_steps)"
    message = _message(err, path, owner)
    return f"{dotted(path)}: {message}" if path else message


def _message(err: ErrorDetails, path: KeyPath, owner: type[BaseModel]) -> str:
    kind, value, ctx = err["type"], err["input"], err.get("ctx", {})
    if kind == "missing":
        field = owner.model_fields.get(str(path[-1])) if path else None
        about = f" ({field.description.rstrip('.')})" if field is not None and field.description else ""
        return f"required key is missing{about}"
    if kind in ("value_error", "assertion_error"):
        return str(ctx.get("error", err["msg"]))
    if kind == "literal_error":
        options = _quoted(str(ctx.get("expected", "")))
        text = f"{show(value)} is not one of: {', '.join(options)}"
        match = did_you_mean(value, options)
        return f"{text} — did you mean `{match}`?" if match is not None else text
    if kind in _BOUNDS:
        bound = ctx.get(_BOUND_CTX[kind])
        if isinstance(bound, float) and bound.is_integer():
            bound = int(bound)  # pydantic reports `gt=0` on a float field as 0.0
        shown = f"{bound:,}" if isinstance(bound, int) else str(bound)  # the upper limits: 1,000,000
        return f"must be {_BOUNDS[kind]} {shown}, got {show(value)}"
    if kind in _EXPECTED:
        # YAML reads `model_revision: 1.0` or `name: 2024-01-01` as a number or a date.
        scalar_key = bool(path) and isinstance(path[-1], str)
        quote = kind == "string_type" and scalar_key and isinstance(value, int | float | datetime.date)
        return f"expected {_EXPECTED[kind]}, got {show(value)}{' — put it in quotes' if quote else ''}"
    return f"{err['msg']} (got {show(value)})"


def _union_message(group: KeyPath, errs: list[tuple[ErrorDetails, KeyPath, str]]) -> str:
    """A value that matched none of a union's branches: list what each branch wanted."""
    wanted = list(dict.fromkeys(_branch_words(label) for _, _, label in errs))
    whole = [err["input"] for err, path, _ in errs if path == group]
    got = f", got {show(whole[0])}" if whole else ""
    return f"expected {' or '.join(wanted)}{got}"


def _branch_words(label: str) -> str:
    if label in _BRANCH_WORDS:
        return _BRANCH_WORDS[label]
    literal = re.fullmatch(r"literal\[(.*)\]", label)
    if literal:
        return " or ".join(f"'{option}'" for option in _quoted(literal.group(1)))
    return label


def _quoted(text: str) -> list[str]:
    """`'a', 'b' or 'c'` -> ['a', 'b', 'c'] (pydantic's rendering of Literal choices)."""
    return re.findall(r"'((?:[^'\\]|\\.)*)'", text)
