"""Reading YAML for the config loaders: strict about duplicate keys, precise about where an error is.

PyYAML's constructed data loses its source positions, so a key's line is looked up on the composed node
graph instead, and only when there is an error to point at.
"""

from __future__ import annotations

from collections.abc import Hashable
from pathlib import Path
from typing import Any, Final

import yaml

from canary_action.config.messages import KeyPath, LineOf
from canary_action.errors import ConfigError
from canary_action.files import FileRefusedError, read_regular_file, size_text

#: A canary config or threshold file is a few KiB of keys (the sample with every key commented: 9 KiB). PyYAML
#: parses about 25 KiB of dense YAML (`[1,1,1,...]`) a second, twice on an error (the line lookup): 64 KiB
#: keeps the worst file to seconds, where 1 MiB took 40 s.
MAX_YAML_BYTES: Final = 64 * 2**10
#: Python refuses longer digit strings as an int (sys.get_int_max_str_digits), and reads base-60 integers
#: (`1:30:00`) in quadratic time: a scalar this long is refused before either is tried.
MAX_INT_DIGITS: Final = 4300
_MAX_INT_BITS: Final = 14_000  # about 4,200 decimal digits: printable, and far past every limit


def read_yaml(path: Path, *, what: str) -> tuple[str, object]:
    """The file's text and its data; every failure (missing, not a file, too large, bad YAML) a ConfigError."""
    try:
        raw = read_regular_file(path, limit=MAX_YAML_BYTES)
    except FileNotFoundError:
        if path.is_symlink():
            raise ConfigError(
                f"{what} {path} is a link to {path.readlink()}, which does not exist",
                fix="point the link at the YAML file, or pass the file's own path",
            ) from None
        raise ConfigError(
            f"{what} not found: {path}", fix=f"check the path (relative paths start at {Path.cwd()})"
        ) from None
    except FileRefusedError as exc:
        raise ConfigError(
            f"{what} {path} {exc}", fix=f"pass the {what} itself: a YAML file of at most {size_text(MAX_YAML_BYTES)}"
        ) from None
    except OSError as exc:
        raise ConfigError(f"cannot read {what} {path}: {exc.strerror}", fix="check the file's permissions") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (bad byte at offset {exc.start})", fix="save it as UTF-8") from None
    try:
        data = parse_yaml(text)
    except _RefusedError as exc:
        raise ConfigError(f"{path}{_where(exc)}: {exc.problem}", fix=exc.fix) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        context = []
        if exc.context and exc.context_mark is not None and exc.context_mark is not mark:
            context = [f"{exc.context} (line {exc.context_mark.line + 1}, column {exc.context_mark.column + 1})"]
        raise ConfigError(
            f"{path}{_where(exc)}: not valid YAML: {exc.problem}",
            errors=context,
            fix="fix the YAML at that line and column",
        ) from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}", fix="fix the YAML") from None
    except RecursionError:
        raise ConfigError(
            f"{path}: nested too deeply to be a {what}", fix="a canary config nests a few levels at most"
        ) from None
    return text, data


def parse_yaml(text: str) -> object:
    """YAML text (a file, a `--set` value) as data, through the strict loader. Raises yaml.YAMLError (with a
    line and column where there is one) or RecursionError."""
    return yaml.load(text, Loader=_StrictLoader)  # a SafeLoader subclass: no arbitrary objects


class _RefusedError(yaml.MarkedYAMLError):
    """Valid YAML that a canary file must not use, with its own fix."""

    def __init__(self, problem: str, mark: yaml.Mark | None, fix: str) -> None:
        super().__init__(problem=problem, problem_mark=mark)
        self.fix = fix


class _StrictLoader(yaml.SafeLoader):
    """PyYAML's safe loader, except that a key written twice is an error instead of the last one winning, and
    that what can make a small file expensive is refused: anchors and aliases (a billion laughs expands 400
    bytes into 10**9 items) and integers too long for Python to read in reasonable time."""

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        event: yaml.Event = self.peek_event()  # type: ignore[no-untyped-call]  # unannotated in types-PyYAML
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
            raise _RefusedError(
                "YAML anchors and aliases are not supported in canary configs",
                event.start_mark if isinstance(event.start_mark, yaml.Mark) else None,  # always, in pure Python
                fix="write the value out in full where the alias (*name) is, and drop the anchor (&name)",
            )
        return super().compose_node(parent, index)

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep=deep)
        except ValueError as exc:  # a date like 2024-13-45: the resolver took it for one, and datetime refuses it
            raise yaml.constructor.ConstructorError(
                None, None, f"{exc} (put the value in quotes if it is text)", node.start_mark
            ) from None

    def construct_strict_int(self, node: yaml.ScalarNode) -> int:
        digits = len(str(node.value).replace("_", ""))
        if digits > MAX_INT_DIGITS:
            raise _RefusedError(
                f"an integer of {digits:,} digits (at most {MAX_INT_DIGITS:,} are read)",
                node.start_mark,
                fix="write the number it should be: every count in a canary config has far fewer digits",
            )
        value: int = super().construct_yaml_int(node)
        if value.bit_length() > _MAX_INT_BITS:  # 0x, 0o, 0b literals: few characters, a value past the limit
            raise _RefusedError(
                f"an integer of {value.bit_length():,} bits (at most {_MAX_INT_BITS:,})",
                node.start_mark,
                fix="write the number it should be: every count in a canary config has far fewer digits",
            )
        return value

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


_StrictLoader.add_constructor("tag:yaml.org,2002:int", _StrictLoader.construct_strict_int)


def _where(exc: yaml.MarkedYAMLError) -> str:
    mark = exc.problem_mark or exc.context_mark
    return f":{mark.line + 1}:{mark.column + 1}" if mark is not None else ""


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
