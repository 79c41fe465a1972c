"""Reading a compare result (result.json) back: it may come from another job's artifact, so it is checked
like any untrusted file — size-capped, strictly parsed, validated against the result schema."""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from canary_action.compare.result import READ_RESULT_VERSIONS, CompareResult
from canary_action.errors import MetricsFileError, ResultFileError
from canary_action.metrics.io import clip_text, listed, load_json, validation_summary

_REMAKE = "write it again with `canary compare CURRENT BASELINE... --json -o result.json`"


def read_result(path: Path) -> CompareResult:
    try:
        data = load_json(path)
    except MetricsFileError as e:  # the JSON layer's wording is about metrics files: say what this file is
        raise ResultFileError(e.message.replace("metrics.json", "result.json"), fix=_REMAKE) from e
    if not isinstance(data, dict) or "result_schema_version" not in data:
        raise ResultFileError(f"{path} is not an rlhf-canary compare result", fix=_REMAKE)
    version = data["result_schema_version"]
    if type(version) is not int or version not in READ_RESULT_VERSIONS:
        raise ResultFileError(
            f"{path} has result_schema_version {clip_text(repr(version), 40)}; this canary reads "
            f"{listed(READ_RESULT_VERSIONS)}",
            fix=f"use the rlhf-canary release that wrote it, or {_REMAKE}",
        )
    try:
        return CompareResult.model_validate(data)
    except ValidationError as e:
        raise ResultFileError(
            f"{path} does not match the compare result schema: {validation_summary(e)}", fix=_REMAKE
        ) from e
