"""Reading and writing metrics.json.

Writes are atomic, so a reader (the artifact upload, a concurrent `canary compare`) never sees half a file.
Reads treat the file as untrusted (a baseline may come from a fork's artifact): size-capped, strictly
parsed, and every failure is a MetricsFileError naming the file, the cause and the fix — never a traceback.
"""

from __future__ import annotations

import functools
import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any, Final, get_args

import pydantic_core
from pydantic import BaseModel, ValidationError

from canary_action.errors import MetricsFileError
from canary_action.files import FileRefusedError, read_regular_file
from canary_action.metrics.schema import READ_VERSIONS, SCHEMA_VERSION, Metrics

METRICS_FILE: Final = "metrics.json"  # the name `canary run` gives it in its run directory
MAX_BYTES: Final = 64 * 2**20  # a 10,000-step run with 40 columns is ~10 MiB; beyond this it is not ours
_SHOWN_ERRORS: Final = 5
#: Unknown keys at which a file is refused before the model sees it: the model would make an error object for
#: each, and 3 million of them took ~26 s and 4 GiB (docs/benchmarks.md).
FLOOD: Final = 1000
#: Series columns a run writes: ~40, a few hundred with per-rank columns; more is not a canary's file.
MAX_COLUMNS: Final = 10_000
OLD_FORMAT_KEYS: Final = frozenset({"run_id", "perf", "stability"})  # rlhf-canary 0.1's top level
_RERUN = "re-run the canary with this release to write a current metrics.json"


class _NonFiniteNumberError(ValueError):
    """NaN, Infinity or an overflowing literal: not JSON, and the schema stores non-finite values as null."""


def write_metrics(metrics: Metrics, path: Path) -> None:
    """Write `metrics` as indented JSON, atomically: a temp file in the same directory, then os.replace.

    Raises ValueError, writing nothing, when a float outside the series is NaN/inf (a bug in the writer:
    the series store non-finite values as null, summaries must not produce them).
    """
    write_json(metrics.model_dump(mode="json"), path)


def write_json(document: object, path: Path) -> None:
    """Write a JSON document as write_metrics does (indented, atomically); NaN/inf raise ValueError."""
    try:
        text = json.dumps(document, indent=2, allow_nan=False, ensure_ascii=False)
    except ValueError as e:
        raise ValueError(f"cannot write {path}: {e} (the schema stores non-finite values as null)") from e
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text + "\n")
            f.flush()
            os.fsync(f.fileno())  # the rename must not reach the disk before the data does
        # mkstemp creates 0600; the artifact upload may run as another user than this (root) container.
        tmp.chmod(0o644)
        tmp.replace(path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def read_metrics(path: Path) -> Metrics:
    """Read and validate a metrics.json of a version this canary reads (READ_VERSIONS). Raises MetricsFileError.

    A valid file takes the fast path: pydantic-core's parser, which refuses NaN and Infinity literals, then the
    model, whose float fields refuse the inf an overflowing literal (1e999) parses to; only `config`, free-form,
    is scanned for one here. Anything else takes load_json's strict parse, whose messages name what is wrong:
    the same errors either way, the valid case about ten times faster (docs/benchmarks.md).
    """
    text = _read_text(path)
    try:
        data = pydantic_core.from_json(text, allow_inf_nan=False)
        if isinstance(data, dict) and _readable_version(data) and _finite(data.get("config")):
            _refuse_flood(path, data)
            return Metrics.model_validate(data)
    except (ValueError, RecursionError):  # ValidationError is a ValueError
        pass
    return metrics_from_json(path, _parse(path, text))


def metrics_from_json(path: Path, data: object) -> Metrics:
    """Validate the parsed content of `path` (load_json's result) as read_metrics does."""
    if not isinstance(data, dict):
        raise MetricsFileError(
            f"{path}: expected a JSON object at the top level, found {_json_type(data)}",
            fix="pass the metrics.json that `canary run` wrote",
        )
    _check_version(path, data)
    _refuse_flood(path, data)
    try:
        return Metrics.model_validate(data)
    except ValidationError as e:
        raise MetricsFileError(
            f"{path} does not match the metrics.json schema (version {SCHEMA_VERSION}): {validation_summary(e)}",
            fix=f"the file was edited or written by a broken writer; {_RERUN}",
        ) from e


def _refuse_flood(path: Path, data: dict[str, Any]) -> None:
    """Refuse a file padded with junk before the model makes an error object for each piece: FLOOD keys that
    its closed records do not have, or more than MAX_COLUMNS series columns. (A few unknown keys get the model's
    own messages; the lists stop at their first bad item, schema.FAIL_FAST.)"""
    series = data.get("series")
    if isinstance(series, dict) and len(series) > MAX_COLUMNS:
        raise MetricsFileError(
            f"{path} is not a metrics.json written by the canary: its series holds {len(series):,} columns "
            f"(a run writes a few hundred at most)",
            fix=f"the file was padded or corrupted; {_RERUN}",
        )
    found: list[str] = []
    _unknown_keys(Metrics, data, "", found)
    if len(found) >= FLOOD:
        raise MetricsFileError(
            f"{path} is not a metrics.json written by the canary: {FLOOD:,} keys or more that this schema does not "
            f"have, such as {', '.join(found[:_SHOWN_ERRORS])}",
            fix=f"the file was padded or corrupted; {_RERUN}",
        )


def _unknown_keys(model: type[BaseModel], data: dict[str, Any], where: str, found: list[str]) -> None:
    """Append to `found` the keys of `data` that `model` (a closed record) and the records inside it do not have,
    as dotted paths; stop at FLOOD."""
    fields = _records_of(model)
    for key, value in data.items():
        if len(found) >= FLOOD:
            return
        if key not in fields:
            found.append(where + clip_text(str(key), 60))
            continue
        inner = fields[key]
        if inner is not None and isinstance(value, dict):
            _unknown_keys(inner, value, f"{where}{key}.", found)
        elif inner is not None and isinstance(value, list):
            for i, item in enumerate(value):
                if isinstance(item, dict):
                    _unknown_keys(inner, item, f"{where}{key}.{i}.", found)


@functools.cache
def _records_of(model: type[BaseModel]) -> dict[str, type[BaseModel] | None]:
    """A record's keys, each with the record it holds (or None)."""
    return {name: _record_in(field.annotation) for name, field in model.model_fields.items()}


def _record_in(annotation: Any) -> type[BaseModel] | None:
    """The record a field holds (alone, in an Optional or in a list), or None."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return next((found for arg in get_args(annotation) if (found := _record_in(arg)) is not None), None)


def validation_summary(error: ValidationError) -> str:
    """'3 errors' and the first few as indented lines, with field paths and messages clipped (untrusted input)."""
    errors = error.errors()
    lines = [f"{_dotted(err['loc'])}: {clip_text(err['msg'], 200)}" for err in errors[:_SHOWN_ERRORS]]
    if len(errors) > _SHOWN_ERRORS:
        lines.append(f"... and {len(errors) - _SHOWN_ERRORS} more")
    return f"{len(errors)} error{'s' if len(errors) != 1 else ''}" + "".join(f"\n  - {line}" for line in lines)


def metrics_json_schema() -> dict[str, Any]:
    """The JSON Schema of metrics.json (for `canary schema` and for readers in other languages)."""
    schema = Metrics.model_json_schema()
    # The model defaults schema_version for writers; a reader requires it, so the published schema does too.
    required = list(schema.get("required", []))
    schema["required"] = ["schema_version", *(key for key in required if key != "schema_version")]
    schema.pop("title", None)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": f"urn:rlhf-canary:metrics:v{SCHEMA_VERSION}",  # a name, not a location: nothing to fetch
        "title": f"rlhf-canary metrics.json, schema version {SCHEMA_VERSION}",
        **schema,
    }


def load_json(path: Path) -> object:
    """Parse `path` strictly: NaN, Infinity and overflowing numbers are refused. Raises MetricsFileError."""
    return _parse(path, _read_text(path))


def _read_text(path: Path) -> str:
    try:
        return read_regular_file(path, limit=MAX_BYTES).decode("utf-8")  # a FIFO or /dev/zero would never end
    except FileRefusedError as e:
        raise MetricsFileError(
            f"{path} {e}: not a metrics.json", fix="pass the metrics.json that `canary run` wrote"
        ) from e
    except FileNotFoundError as e:
        raise MetricsFileError(
            f"{path} does not exist",
            fix="check the path: `canary run` writes metrics.json into its output directory",
        ) from e
    except UnicodeDecodeError as e:
        raise MetricsFileError(f"{path} is not UTF-8 text (byte {e.start})", fix=_RERUN) from e
    except OSError as e:
        raise MetricsFileError(
            f"cannot read {path}: {e.strerror or e}", fix="check that it is a readable file, not a directory"
        ) from e


def _parse(path: Path, text: str) -> object:
    try:
        return json.loads(text, parse_constant=_reject_constant, parse_float=_finite_float)
    except json.JSONDecodeError as e:
        raise MetricsFileError(
            f"{path} is not valid JSON: {e.msg} at line {e.lineno}, column {e.colno}",
            fix=f"the file is truncated or corrupt; {_RERUN}",
        ) from e
    except _NonFiniteNumberError as e:
        raise MetricsFileError(f"{path}: {e}", fix=f"write non-finite values as null; {_RERUN}") from e
    except (ValueError, RecursionError) as e:  # an integer of over 4300 digits, or absurd nesting
        raise MetricsFileError(f"{path} cannot be parsed: {clip_text(str(e), 200)}", fix=_RERUN) from e


def _readable_version(data: dict[str, Any]) -> bool:
    version = data.get("schema_version")
    return type(version) is int and version in READ_VERSIONS  # not True, not 1.0, not "1"


def _finite(value: object) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(_finite(item) for item in value.values())
    if isinstance(value, list):
        return all(_finite(item) for item in value)
    return True


def _check_version(path: Path, data: dict[str, Any]) -> None:
    if "schema_version" not in data:
        if data.keys() >= OLD_FORMAT_KEYS:
            raise MetricsFileError(
                f"{path} is in the rlhf-canary 0.1 format (no schema_version; it has run_id, perf and "
                f"stability); this reader reads schema version {SCHEMA_VERSION} only",
                fix=f"`canary compare` reads 0.1 files as a baseline; for a version {SCHEMA_VERSION} file, " + _RERUN,
            )
        raise MetricsFileError(
            f"{path} has no schema_version: it is not an rlhf-canary metrics.json",
            fix="pass the metrics.json that `canary run` wrote",
        )
    version = data["schema_version"]
    if _readable_version(data):
        return
    newer = type(version) is int and version > SCHEMA_VERSION
    found = clip_text(json.dumps(version, ensure_ascii=False), 60)
    raise MetricsFileError(
        f"{path} has schema_version {found}; this canary reads versions {listed(READ_VERSIONS)}",
        fix="upgrade rlhf-canary: a newer release wrote this file" if newer else _RERUN,
    )


def _reject_constant(name: str) -> float:
    raise _NonFiniteNumberError(f"contains {name}, which JSON does not allow")


def _finite_float(literal: str) -> float:
    value = float(literal)
    if value in (float("inf"), float("-inf")):
        raise _NonFiniteNumberError(f"the number {clip_text(literal, 40)} overflows a double")
    return value


def _json_type(value: object) -> str:
    names = {list: "an array", str: "a string", bool: "a boolean", int: "a number", float: "a number"}
    return "null" if value is None else names.get(type(value), type(value).__name__)


def _dotted(loc: tuple[int | str, ...]) -> str:
    return ".".join(clip_text(str(part), 60) for part in loc) or "(top level)"


def clip_text(text: str, limit: int) -> str:
    """Escape control characters and cut to `limit`: a key from an untrusted file must not forge CI log lines
    (a newline followed by `::error::` is a workflow command)."""
    escaped = "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)
    return escaped if len(escaped) <= limit else escaped[: limit - 1] + "…"


def counted(n: int, noun: str) -> str:
    """(1, "run") -> '1 run'; (3, "run") -> '3 runs'."""
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def listed(versions: tuple[int, ...]) -> str:
    """(1, 2, 3) -> '1, 2 and 3'."""
    *first, last = map(str, versions)
    return f"{', '.join(first)} and {last}" if first else last
