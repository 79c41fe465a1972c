"""`--set KEY.PATH=VALUE`: applied to a config's data, and named in its errors.

A value that came from the command line has no line in the file, and blaming the file for it sends the user
looking for a typo that is not there: an error about such a value says `from --set KEY=VALUE` instead.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from canary_action.config import messages
from canary_action.config.source import parse_yaml
from canary_action.errors import ConfigError

__all__ = ["Overrides", "apply_overrides"]

_SHOWN_VALUE = 60  # characters of a value quoted back in an error


@dataclass
class Overrides:
    """The `--set` options of one load, to say which errors they caused."""

    #: (dotted key as parts, "KEY=VALUE" as given), in the order given: the last one to touch a key won.
    given: list[tuple[tuple[str, ...], str]]
    #: How many error lines origin_of has blamed on an option (`from`), or on options and file together (`with`).
    num_from: int = 0
    num_with: int = 0

    @classmethod
    def of(cls, overrides: Sequence[str]) -> Overrides:
        given = []
        for override in overrides:
            key, _, raw = override.partition("=")
            value = raw.strip()
            if len(value) > _SHOWN_VALUE:
                value = value[: _SHOWN_VALUE - 3] + "..."
            given.append((tuple(key.strip().split(".")), f"{key.strip()}={value}"))
        return cls(given)

    def covers(self, path: messages.KeyPath) -> bool:
        """Whether the value at `path` (or a block around it) was set on the command line."""
        return any(path[: len(parts)] == parts for parts, _ in self.given)

    def origin_of(self, path: messages.KeyPath, message: str) -> str | None:
        """Where the value at `path` came from, when an option set it or something inside it:
        - `from --set KEY=VALUE`: the option set this value (or the block around it), or wrote this unknown key
          (`--set profiler.foo.bar=1` makes `profiler.foo`);
        - `with --set KEY=VALUE, ...`: a rule over a block holding options' values; at the top (a rule across
          keys), only the options whose keys the message names."""
        setting = [shown for parts, shown in self.given if path[: len(parts)] == parts]
        inside = [(parts[len(path) :], shown) for parts, shown in self.given if parts[: len(path)] == path]
        if path and inside and message.startswith("unknown key"):
            setting = [shown for _, shown in inside]
        if setting:
            self.num_from += 1
            return f"from --set {setting[-1]}"
        named = [shown for rest, shown in inside if path or _names(message, rest)]
        if named:
            self.num_with += 1
            return "with " + ", ".join(f"--set {shown}" for shown in named)
        return None

    def heading(self, source: str, errors: Sequence[str]) -> tuple[str, str]:
        """The error's subject and fix: the file, the options, or both, as the lines blame them."""
        sample = "`canary init-config` writes a sample with every key documented"
        dotted = "(a nested key is dotted: --set profiler.enabled=true)"
        if not self.num_from and not self.num_with:
            return source, f"correct the keys listed above; {sample}"
        if self.num_from >= messages.num_listed(errors):
            return f"--set options over {source}", f"correct the --set KEY=VALUE options named above {dotted}"
        return f"{source} and its --set options", f"correct the keys and --set options listed above {dotted}; {sample}"


def _names(message: str, parts: tuple[str, ...]) -> bool:
    """Whether the message names the key (`profiler.start_step`, or `max_steps`) as a word of its own."""
    key = ".".join(parts)
    return bool(key) and re.search(rf"(?<![\w.]){re.escape(key)}(?!\w)", message) is not None


def apply_overrides(data: dict[Any, Any], overrides: Sequence[str], *, origin: str) -> list[str]:
    """`--set a.b=value`: the value is YAML (`true`, `12`, `[builtin:length]`); absent mappings are made.
    Returns the notices saying what each option replaced; raises ConfigError for malformed options."""
    notices, errors = [], []
    for override in overrides:
        key, sep, raw = override.partition("=")
        parts = key.strip().split(".")
        if not sep or not all(part.strip() for part in parts):
            errors.append(f"--set {override!r}: expected KEY=VALUE (e.g. max_steps=5 or profiler.enabled=true)")
            continue
        try:
            value = parse_yaml(raw)
        except yaml.YAMLError as exc:
            errors.append(f"--set {override!r}: the value is not valid YAML ({getattr(exc, 'problem', exc)})")
            continue
        except RecursionError:
            errors.append(f"--set {override!r}: the value is nested too deeply")
            continue
        node = data
        for depth, part in enumerate(parts[:-1]):
            if node.get(part) is None:
                node[part] = {}
            elif not isinstance(node[part], dict):
                prefix = ".".join(parts[: depth + 1])
                errors.append(f"--set {override!r}: `{prefix}` is {messages.show(node[part])}, not a mapping")
                break
            node = node[part]
        else:
            shown = f"{key.strip()}={raw.strip()}"
            if parts[-1] in node:
                notices.append(f"--set {shown} overrides the {origin}'s {messages.show(node[parts[-1]])}")
            else:
                notices.append(f"--set {shown} sets a key the {origin} leaves at its default")
            node[parts[-1]] = value
    if errors:
        raise ConfigError(
            f"--set: {messages.count(errors)}", errors=errors, fix="write each override as --set KEY.PATH=VALUE"
        )
    return notices
