"""metrics.json on disk: atomic writes, and reads that fail with a cause and a fix, never a traceback."""

from __future__ import annotations

import json
import math
import os
import re
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from canary_action.errors import MetricsFileError
from canary_action.metrics import io
from canary_action.metrics.io import metrics_json_schema, read_metrics, write_metrics
from canary_action.metrics.schema import Metrics
from tests.factories import make_metrics
from tests.strategies import JSON_VALUES, mutate_somewhere


def write_json(path: Path, value: Any) -> Path:
    path.write_text(json.dumps(value), encoding="utf-8")
    return path


def read_error(path: Path) -> str:
    with pytest.raises(MetricsFileError) as caught:
        read_metrics(path)
    assert caught.value.fix, "every error says how to fix it"
    return caught.value.render()


def test_round_trip(tmp_path: Path) -> None:
    metrics = make_metrics()
    path = tmp_path / "out" / "metrics.json"
    write_metrics(metrics, path)
    assert read_metrics(path) == metrics
    text = path.read_text(encoding="utf-8")
    assert text.startswith('{\n  "schema_version": 4,')  # indent 2, version first
    assert text.endswith("}\n")
    assert [p.name for p in path.parent.iterdir()] == ["metrics.json"]  # no temp file left behind
    assert stat.S_IMODE(path.stat().st_mode) == 0o644  # readable by the artifact upload's user


def test_non_finite_values_are_stored_as_null(tmp_path: Path) -> None:
    metrics = make_metrics(series={"train/loss": [1.0, None] + [0.5] * 28})
    path = tmp_path / "metrics.json"
    write_metrics(metrics, path)
    assert json.loads(path.read_text())["series"]["train/loss"][1] is None


def test_a_failed_write_leaves_the_old_file_untouched(tmp_path: Path) -> None:
    path = tmp_path / "metrics.json"
    good = make_metrics()
    write_metrics(good, path)
    assert good.summary is not None
    bad = good.model_copy(update={"summary": good.summary.model_copy(update={"tokens_per_s": math.nan})})
    with pytest.raises(ValueError, match="non-finite values as null"):
        write_metrics(bad, path)
    assert read_metrics(path) == good
    assert [p.name for p in tmp_path.iterdir()] == ["metrics.json"]


def test_missing_file(tmp_path: Path) -> None:
    message = read_error(tmp_path / "nope.json")
    assert "nope.json does not exist" in message
    assert "fix:" in message


def test_a_directory(tmp_path: Path) -> None:
    assert f"{tmp_path} is a directory, not a regular file" in read_error(tmp_path)


def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path: Path) -> None:
    fifo = tmp_path / "metrics.json"
    os.mkfifo(fifo)
    assert f"{fifo} is a named pipe (FIFO), not a regular file" in read_error(fifo)


def test_not_json_says_where(tmp_path: Path) -> None:
    path = tmp_path / "metrics.json"
    path.write_text('{\n  "schema_version": 1,\n  "run": {oops}\n}', encoding="utf-8")
    message = read_error(path)
    assert "is not valid JSON" in message
    assert "line 3, column 11" in message


def test_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "metrics.json"
    path.write_bytes(b'{"a": "\xff"}')
    assert "not UTF-8" in read_error(path)


@pytest.mark.parametrize(("text", "said"), [("[1, 2]", "an array"), ('"x"', "a string"), ("null", "null")])
def test_not_an_object(tmp_path: Path, text: str, said: str) -> None:
    path = tmp_path / "metrics.json"
    path.write_text(text, encoding="utf-8")
    assert f"expected a JSON object at the top level, found {said}" in read_error(path)


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity", "1e999", "-1E+400", "1" + "0" * 400 + ".5"])
def test_non_finite_numbers_are_refused(tmp_path: Path, literal: str) -> None:
    path = tmp_path / "metrics.json"
    path.write_text('{"schema_version": 1, "x": ' + literal + "}", encoding="utf-8")
    assert "non-finite values as null" in read_error(path)


def test_a_newer_schema_version(tmp_path: Path) -> None:
    path = write_json(tmp_path / "metrics.json", {**make_metrics().model_dump(mode="json"), "schema_version": 99})
    message = read_error(path)
    assert "has schema_version 99; this canary reads versions 1, 2, 3 and 4" in message
    assert "upgrade rlhf-canary" in message


@pytest.mark.parametrize("version", ["1", 1.0, True, 0, None])
def test_schema_version_must_be_an_integer_this_reader_knows(tmp_path: Path, version: Any) -> None:
    path = write_json(tmp_path / "metrics.json", {**make_metrics().model_dump(mode="json"), "schema_version": version})
    assert f"has schema_version {json.dumps(version)}; this canary reads versions 1, 2, 3 and 4" in read_error(path)


def test_version_1_files_still_read(tmp_path: Path) -> None:
    """Version 2 only added `pair`: a version 1 file (every baseline recorded before lockstep) reads as before."""
    data = {**make_metrics().model_dump(mode="json", exclude={"pair"}), "schema_version": 1}
    assert read_metrics(write_json(tmp_path / "metrics.json", data)).pair is None
    with_pair = {**data, "pair": {"pair_id": "p", "side": "head", "chunk_steps": 2, "tree": "/t"}}
    assert read_metrics(write_json(tmp_path / "metrics.json", {**with_pair, "schema_version": 2})).pair is not None


def test_the_old_rlhf_canary_format(tmp_path: Path) -> None:
    old = {"run_id": "abc", "perf": {"step_time": {"mean": 0.1}}, "stability": {"nan_steps": 0}, "memory": {}}
    message = read_error(write_json(tmp_path / "metrics.json", old))
    assert "rlhf-canary 0.1 format" in message
    assert "`canary compare` reads 0.1 files" in message


def test_no_schema_version(tmp_path: Path) -> None:
    assert "has no schema_version" in read_error(write_json(tmp_path / "m.json", {"hello": "world"}))


def test_validation_errors_have_dotted_paths(tmp_path: Path) -> None:
    doc = make_metrics().model_dump(mode="json")
    del doc["run"]["run_id"]
    doc["series"]["train/loss"][3] = "high"
    doc["status"]["state"] = "exploded"
    message = read_error(write_json(tmp_path / "metrics.json", doc))
    assert "3 errors" in message
    assert "\n  - run.run_id: Field required" in message
    assert "\n  - series.train/loss.3: " in message
    assert "\n  - status.state: " in message


def test_many_validation_errors_are_cut_short(tmp_path: Path) -> None:
    doc = make_metrics().model_dump(mode="json")
    doc.update({f"unknown_{i}": i for i in range(9)})
    message = read_error(write_json(tmp_path / "metrics.json", doc))
    assert "9 errors" in message
    assert message.count("\n  - unknown_") == 5
    assert "... and 4 more" in message


@pytest.mark.parametrize("where", ["top", "summary", "stability.grad_norm_spikes.0"])
def test_a_file_padded_with_unknown_keys_is_refused_before_the_model_sees_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """Millions of junk keys made the model build an error object each (26 s and 4 GiB for 3 million): a flood is
    refused by counting, and the model is never asked."""
    doc = make_metrics().model_dump(mode="json")
    doc["stability"]["grad_norm_spikes"] = [{"step": 3, "value": 9.0, "reference": 1.0}]
    target = doc if where == "top" else doc[where] if "." not in where else doc["stability"]["grad_norm_spikes"][0]
    target.update({f"junk_{i}": i for i in range(io.FLOOD)})
    monkeypatch.setattr(Metrics, "model_validate", lambda *_: pytest.fail("the model validated a flood"))
    message = read_error(write_json(tmp_path / "metrics.json", doc))
    prefix = "" if where == "top" else f"{where}."
    assert f"1,000 keys or more that this schema does not have, such as {prefix}junk_0, {prefix}junk_1" in message


def test_a_series_of_too_many_columns_or_bad_items_is_refused_at_once(tmp_path: Path) -> None:
    doc = make_metrics().model_dump(mode="json")
    doc["series"] |= {f"junk/{i}": [] for i in range(io.MAX_COLUMNS)}
    assert "columns (a run writes a few hundred at most)" in read_error(write_json(tmp_path / "wide.json", doc))
    doc = make_metrics().model_dump(mode="json")
    doc["series"]["train/loss"] = ["x"] * 100_000  # each list stops at its first bad item: one error, not 100,000
    message = read_error(write_json(tmp_path / "long.json", doc))
    assert "1 error\n  - series.train/loss.0: " in message


def test_untrusted_keys_cannot_forge_log_lines(tmp_path: Path) -> None:
    doc = {**make_metrics().model_dump(mode="json"), "x\n::error title=pwned::": 1}
    message = read_error(write_json(tmp_path / "metrics.json", doc))
    assert "\n::error" not in message
    assert "x\\n::error" in message


def test_a_huge_file_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(io, "MAX_BYTES", 100)
    path = write_json(tmp_path / "metrics.json", make_metrics().model_dump(mode="json"))
    assert "is larger than" in read_error(path)


@settings(max_examples=200, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=JSON_VALUES)
def test_arbitrary_json_never_escapes_as_a_traceback(tmp_path: Path, value: Any) -> None:
    path = write_json(tmp_path / "metrics.json", value)
    with pytest.raises(MetricsFileError):
        read_metrics(path)


@settings(max_examples=200, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_a_mutated_document_is_read_or_refused(tmp_path: Path, data: st.DataObject) -> None:
    doc = make_metrics(num_steps=6).model_dump(mode="json")
    mutate_somewhere(doc, data)
    path = write_json(tmp_path / "metrics.json", doc)
    assert outcome_of(lambda: read_metrics(path)) == outcome_of(lambda: io.metrics_from_json(path, io.load_json(path)))


def outcome_of(read: Callable[[], Metrics]) -> Metrics | str:
    try:
        return read()
    except MetricsFileError as e:
        return e.render()


@pytest.mark.parametrize("literal", ["NaN", "-Infinity", "1e999", "-1E+400"])
@pytest.mark.parametrize("where", ['"config": {', '"series": {"train/loss": [0.5, ', '"tokens_per_s": '])
def test_a_non_finite_number_anywhere_in_a_real_file_is_refused(tmp_path: Path, literal: str, where: str) -> None:
    """The fast path (pydantic-core's parser, then the model) refuses what the strict parse refuses, alike."""
    doc = make_metrics(num_steps=6).model_dump(mode="json")
    doc["config"]["x"] = 0.0  # the config always has a float key to replace
    text = json.dumps(doc)
    if where == '"config": {':
        text = text.replace('"x": 0.0', f'"x": {literal}')
    elif where.startswith('"series"'):
        text = text.replace('"train/loss": [', f'"train/loss": [{literal}, ', 1)
    else:
        text = re.sub(r'"tokens_per_s": [^,}]+', f'"tokens_per_s": {literal}', text, count=1)
    assert literal in text
    path = tmp_path / "metrics.json"
    path.write_text(text, encoding="utf-8")
    assert "non-finite values as null" in read_error(path)


def test_a_valid_file_takes_the_fast_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A hex hash holding `e526` once sent every file through the per-number parse (0.1 s for 2,000 steps)."""
    doc = make_metrics(num_steps=6).model_dump(mode="json")
    doc["env"]["fingerprint_hash"] = "ab3e526f" * 8
    path = write_json(tmp_path / "metrics.json", doc)
    monkeypatch.setattr(io, "_parse", lambda *_: pytest.fail("the strict parse ran for a valid file"))
    assert read_metrics(path).model_dump(mode="json") == doc


@settings(max_examples=100, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(raw=st.binary(max_size=200))
def test_arbitrary_bytes_never_escape_as_a_traceback(tmp_path: Path, raw: bytes) -> None:
    path = tmp_path / "metrics.json"
    path.write_bytes(raw)
    with pytest.raises(MetricsFileError):
        read_metrics(path)


def test_deep_nesting_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "metrics.json"
    path.write_text("[" * 100_000 + "]" * 100_000, encoding="utf-8")
    assert "cannot be parsed" in read_error(path)


def test_json_schema() -> None:
    schema = metrics_json_schema()
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["$id"] == "urn:rlhf-canary:metrics:v4"
    assert schema["title"].startswith("rlhf-canary metrics.json")
    assert set(schema["properties"]) == set(Metrics.model_fields)
    assert schema["required"][0] == "schema_version"
    assert schema["properties"]["schema_version"]["enum"] == [1, 2, 3, 4]
    json.dumps(schema, allow_nan=False)
