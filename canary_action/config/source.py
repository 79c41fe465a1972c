"""Reading YAML for the config loaders: strict about duplicate keys, precise about where an error is.

PyYAML's constructed data loses its source positions, so a key's line is looked up on the composed node
graph instead, and only when there is an error to point at.
"""

from __future__ import annotations

from collections.abc import Hashable
from pathlib import Path
from typing import Any

import yaml

from canary_action.config.messages import KeyPath, LineOf
from canary_action.errors import ConfigError


def read_yaml(path: Path, *, what: str) -> tuple[str, object]:
    """The file's text and its data; every failure (missing, unreadable, bad YAML) as a ConfigError."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(
            f"{what} not found: {path}", fix=f"check the path (relative paths start at {Path.cwd()})"
        ) from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (bad byte at offset {exc.start})", fix="save it as UTF-8") from None
    except OSError as exc:
        raise ConfigError(f"cannot read {what} {path}: {exc.strerror}") from None
    try:
        data = yaml.load(text, Loader=_StrictLoader)  # a SafeLoader subclass: no arbitrary objects
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f":{mark.line + 1}:{mark.column + 1}" if mark is not None else ""
        context = []
        if exc.context and exc.context_mark is not None and exc.context_mark is not mark:
            context = [f"{exc.context} (line {exc.context_mark.line + 1}, column {exc.context_mark.column + 1})"]
        raise ConfigError(
            f"{path}{where}: not valid YAML: {exc.problem}",
            errors=context,
            fix="fix the YAML at that line and column",
        ) from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from None
    except RecursionError:
        raise ConfigError(f"{path}: nested too deeply to be a {what}") from None
    return text, data


class _StrictLoader(yaml.SafeLoader):
    """PyYAML's safe loader, except that a key written twice is an error instead of the last one winning."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Hashable, Any]:
        first_seen: dict[object, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge" or not isinstance(key_node, yaml.ScalarNode):
                continue
            key = self.construct_object(key_node, deep=deep)
            if key in first_seen:
                raise yaml.constructor.ConstructorError(
                    None,
                    None,
                    f"duplicate key {key!r} (first written at line {first_seen[key]})",
                    key_node.start_mark,
                )
            first_seen[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep=deep)


def line_finder(text: str) -> LineOf:
    """Path -> the line of that key in the YAML text, found on the node graph (marks survive there only)."""
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        root = None

    def line_of(key_path: KeyPath) -> int | None:
        node, line = root, None
        for part in key_path:
            if isinstance(node, yaml.MappingNode):
                pairs = [(k, v) for k, v in node.value if isinstance(k, yaml.ScalarNode) and k.value == str(part)]
                if not pairs:
                    return None
                line, node = pairs[0][0].start_mark.line + 1, pairs[0][1]
            elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and 0 <= part < len(node.value):
                node = node.value[part]
                line = node.start_mark.line + 1
            else:
                return None
        return line

    return line_of
