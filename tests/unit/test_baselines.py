"""Finding and reading baselines: order, de-duplication, exclusions, directories, and one clear error per
bad file (naming it, with a fix) — never a traceback."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from canary_action.compare import baselines
from canary_action.compare.baselines import BaselineSet, load_baselines, load_current
from canary_action.compare.runs import RunData, from_metrics
from canary_action.errors import BaselineError, MetricsFileError
from canary_action.metrics import io
from canary_action.metrics.io import write_metrics
from canary_action.metrics.schema import Status
from tests.factories import make_metrics
from tests.strategies import JSON_VALUES

FIXTURES = Path(__file__).parents[1] / "fixtures" / "baselines"
LEGACY_WORKLOAD = {"model_name": "EleutherAI/pythia-70m", "dataset_name": "Anthropic/hh-rlhf"}


def current_run(**overrides: Any) -> RunData:
    return from_metrics(make_metrics(**overrides), "current/metrics.json")


def baseline(path: Path, seed: int, started: str | None = None, **overrides: Any) -> Path:
    """A completed v1 run `sft-smoke-<seed>` of the current run's config, written to `path`."""
    run = {"started_at": started} if started else {}
    write_metrics(make_metrics(num_steps=12, seed=seed, run=run, **overrides), path)
    return path


def ids(found: BaselineSet) -> list[str]:
    return [run.run_id for run in found.runs]


def refusal(paths: list[Path], current: RunData | None = None) -> str:
    with pytest.raises(BaselineError) as caught:
        load_baselines(paths, current or current_run())
    message = caught.value.render()
    assert "\n  fix: " in message
    return message


@pytest.mark.parametrize(
    ("name", "said"),
    [
        ("corrupt.json", "is not valid JSON"),
        ("wrong_version.json", "has schema_version 99; this canary reads versions 1, 2, 3 and 4"),
        ("not_object.json", "expected a JSON object at the top level"),
        ("other_config.json", "is from config 'dpo-smoke', the current run is 'sft-smoke'"),
        ("legacy_bad.json", "perf.step_time: Field required"),
        ("failed_run.json", "sft-smoke-5: failed run (OutOfMemoryError in train)"),
        ("empty_dir", "no baseline found"),
    ],
)
def test_each_bad_fixture_is_one_clear_error(name: str, said: str) -> None:
    message = refusal([FIXTURES / name])
    assert message.startswith(("unusable baseline: ", "no baseline: "))
    assert str(FIXTURES / name) in message
    assert said in message


def test_the_fixes_say_what_to_do() -> None:
    assert "upgrade rlhf-canary" in refusal([FIXTURES / "wrong_version.json"])
    assert "pass the baseline artifact of config 'sft-smoke'" in refusal([FIXTURES / "other_config.json"])
    assert "canary save-baseline" in refusal([FIXTURES / "empty_dir"])
    assert "leave this baseline out" in refusal([FIXTURES / "corrupt.json"])


def test_files_keep_the_order_given(tmp_path: Path) -> None:
    older = baseline(tmp_path / "a.json", 1, "2026-01-01T00:00:00.000Z")
    newer = baseline(tmp_path / "b.json", 2, "2026-01-02T00:00:00.000Z")
    found = load_baselines([older, newer], current_run())
    assert ids(found) == ["sft-smoke-1", "sft-smoke-2"]
    assert (found.excluded, found.notes) == ([], [])
    assert found.runs[0].source == str(older)


def test_a_directory_newest_first_then_by_name(tmp_path: Path) -> None:
    baseline(tmp_path / "z" / "metrics.json", 1, "2026-01-01T00:00:00.000Z")
    baseline(tmp_path / "b.json", 2, "2026-01-03T00:00:00.000Z")
    baseline(tmp_path / "a.json", 3, "2026-01-03T00:00:00.000Z")
    baseline(tmp_path / "deep" / "er" / "run.json", 4, "2026-01-02T00:00:00.000Z")
    found = load_baselines([tmp_path], current_run())
    assert ids(found) == ["sft-smoke-3", "sft-smoke-2", "sft-smoke-4", "sft-smoke-1"]


def test_files_then_directories_in_the_order_given(tmp_path: Path) -> None:
    folder = tmp_path / "history"
    baseline(folder / "x.json", 1, "2026-01-09T00:00:00.000Z")
    first = baseline(tmp_path / "first.json", 2, "2026-01-01T00:00:00.000Z")
    assert ids(load_baselines([first, folder], current_run())) == ["sft-smoke-2", "sft-smoke-1"]


def test_hidden_and_other_files_are_not_read(tmp_path: Path) -> None:
    baseline(tmp_path / "run.json", 1)
    baseline(tmp_path / ".hidden.json", 2)
    baseline(tmp_path / ".cache" / "run.json", 3)
    (tmp_path / "notes.txt").write_text("{", encoding="utf-8")
    (tmp_path / "metrics.json.tmp").write_text("{", encoding="utf-8")
    assert ids(load_baselines([tmp_path], current_run())) == ["sft-smoke-1"]


def test_files_in_a_directory_that_are_no_metrics_files_are_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    size = baseline(tmp_path / "run" / "metrics.json", 1).stat().st_size
    (tmp_path / "run" / "profiler").mkdir()
    (tmp_path / "run" / "profiler" / "trace.json").write_text('{"traceEvents": []}', encoding="utf-8")
    shutil.copy(FIXTURES / "not_object.json", tmp_path / "list.json")
    huge = tmp_path / "huge.json"
    huge.write_text(json.dumps({"traceEvents": [0] * size}), encoding="utf-8")
    monkeypatch.setattr(io, "MAX_BYTES", size)
    found = load_baselines([tmp_path], current_run())
    assert ids(found) == ["sft-smoke-1"]
    assert sorted(found.notes) == [
        f"skipped {huge}: larger than 0 MiB, not a metrics file",
        f"skipped {tmp_path / 'list.json'}: not a metrics file",
        f"skipped {tmp_path / 'run' / 'profiler' / 'trace.json'}: not a metrics file",
    ]


def test_a_folder_of_only_other_json_says_which_files_were_looked_at_and_why_none_is_a_baseline(
    tmp_path: Path,
) -> None:
    # Issue 15: "no baseline found" alone, where docs/baselines.md promises a note for each skipped file.
    (tmp_path / "run" / "profiler").mkdir(parents=True)
    (tmp_path / "run" / "profiler" / "trace.json").write_text('{"traceEvents": []}', encoding="utf-8")
    shutil.copy(FIXTURES / "not_object.json", tmp_path / "list.json")
    message = refusal([tmp_path])
    assert message.startswith(f"no baseline: no baseline found in {tmp_path}: 2 .json files looked at, none of them")
    assert f"{tmp_path / 'list.json'}: not a metrics file" in message
    assert f"{tmp_path / 'run' / 'profiler' / 'trace.json'}: not a metrics file" in message


def test_a_folder_without_json_says_so(tmp_path: Path) -> None:
    (tmp_path / ".gitkeep").touch()
    (tmp_path / "notes.txt").write_text("{", encoding="utf-8")
    assert "no .json file below it (hidden files and folders are skipped)" in refusal([tmp_path])


def test_many_skipped_files_are_counted_past_the_first_five(tmp_path: Path) -> None:
    for number in range(7):
        (tmp_path / f"report-{number}.json").write_text("[]", encoding="utf-8")
    message = refusal([tmp_path])
    assert "7 .json files looked at" in message
    assert message.count(": not a metrics file") == 5
    assert "; and 2 more)" in message


@pytest.mark.parametrize("name", ["corrupt.json", "wrong_version.json", "legacy_bad.json"])
def test_a_broken_metrics_file_in_a_directory_is_still_an_error(tmp_path: Path, name: str) -> None:
    baseline(tmp_path / "good.json", 1)
    shutil.copy(FIXTURES / name, tmp_path / name)
    assert str(tmp_path / name) in refusal([tmp_path])


def test_a_folder_holding_runs_of_another_config_too_leaves_them_out_and_says_so(tmp_path: Path) -> None:
    """A baselines folder as users make it (every config's runs saved together): another config's run is left
    out with a note, as the current run is; named on its own it stays an error (the user meant that file)."""
    baseline(tmp_path / "good.json", 1)
    shutil.copy(FIXTURES / "other_config.json", tmp_path / "other_config.json")
    found = load_baselines([tmp_path], current_run())
    assert [run.run_id for run in found.runs] == ["sft-smoke-1"]
    [left_out] = found.excluded
    assert left_out.endswith(": another config ('dpo-smoke')")
    only_others = tmp_path / "others"
    only_others.mkdir()
    shutil.copy(FIXTURES / "other_config.json", only_others / "other_config.json")
    assert "every run was left out" in refusal([only_others])
    assert "another config ('dpo-smoke')" in refusal([only_others])


def test_links_out_of_the_directory_are_not_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    baseline(outside / "elsewhere.json", 9)
    folder = tmp_path / "baselines"
    baseline(folder / "own.json", 1)
    (folder / "link.json").symlink_to(outside / "elsewhere.json")
    (folder / "linked_dir").symlink_to(outside, target_is_directory=True)
    (folder / "inside.json").symlink_to(folder / "own.json")  # stays inside: read (and de-duplicated)
    found = load_baselines([folder], current_run())
    assert ids(found) == ["sft-smoke-1"]
    assert f"skipped {folder / 'link.json'}: a link out of {folder}" in found.notes
    assert any("was found twice" in note for note in found.notes)


def test_a_name_with_control_characters_is_skipped(tmp_path: Path) -> None:
    baseline(tmp_path / "ok.json", 1)
    baseline(tmp_path / "x\n::error::.json", 2)
    found = load_baselines([tmp_path], current_run())
    assert ids(found) == ["sft-smoke-1"]
    assert found.notes == [f"skipped {tmp_path}/x\\n::error::.json: control characters in its name"]


def test_too_many_files_in_a_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(baselines, "MAX_DIR_FILES", 2)
    for seed, mtime in [(1, 100), (2, 300), (3, 200)]:
        os.utime(baseline(tmp_path / f"{seed}.json", seed), (mtime, mtime))
    found = load_baselines([tmp_path], current_run())
    assert sorted(ids(found)) == ["sft-smoke-2", "sft-smoke-3"]  # the most recently modified
    assert found.notes == [f"3 .json files under {tmp_path}; read the 2 most recently modified"]


def test_duplicates_keep_the_first(tmp_path: Path) -> None:
    first = baseline(tmp_path / "a.json", 1)
    copy = tmp_path / "copy.json"
    shutil.copy(first, copy)
    found = load_baselines([first, copy, first], current_run())
    assert ids(found) == ["sft-smoke-1"]
    assert found.runs[0].source == str(first)
    assert found.notes[0] == f"baseline sft-smoke-1 was found twice ({first}, {copy}); the first is used"
    assert len(found.notes) == 2


def test_exclusions_say_why(tmp_path: Path) -> None:
    good = baseline(tmp_path / "good.json", 1)
    itself = baseline(tmp_path / "current.json", 0)
    stopped = baseline(tmp_path / "stopped.json", 2, status=Status(state="stopped_early", reason="timeout", step=7))
    found = load_baselines([good, itself, stopped, FIXTURES / "failed_run.json"], current_run())
    assert ids(found) == ["sft-smoke-1"]
    assert found.excluded == [
        "sft-smoke-0: the current run itself",
        "sft-smoke-2: stopped early at step 7 (timeout): not a full run",
        "sft-smoke-5: failed run (OutOfMemoryError in train)",
    ]


def test_nothing_usable(tmp_path: Path) -> None:
    message = refusal([baseline(tmp_path / "current.json", 0)])
    assert "no usable baseline" in message
    assert "sft-smoke-0: the current run itself" in message
    assert "no baseline found in (none given)" in refusal([])


def test_one_baseline_of_another_config_among_several_is_an_error(tmp_path: Path) -> None:
    good = baseline(tmp_path / "good.json", 1)
    message = refusal([good, FIXTURES / "other_config.json"])
    assert "other_config.json is from config 'dpo-smoke'" in message


def test_at_most_max_baselines_newest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(baselines, "MAX_BASELINES", 3)
    for seed in range(1, 6):
        baseline(tmp_path / f"{seed}.json", seed, f"2026-01-0{seed}T00:00:00.000Z")
    found = load_baselines([tmp_path], current_run())
    assert ids(found) == ["sft-smoke-5", "sft-smoke-4", "sft-smoke-3"]
    assert found.notes == ["5 usable baselines found; the newest 3 are used"]


def test_missing_paths_and_special_files(tmp_path: Path) -> None:
    assert "baseline " + str(tmp_path / "nope.json") + " does not exist" in refusal([tmp_path / "nope.json"])
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    assert "is not a regular file" in refusal([fifo])


def test_an_rlhf_canary_0_1_baseline(tmp_path: Path) -> None:
    newer = baseline(tmp_path / "v1.json", 1, config=LEGACY_WORKLOAD)
    found = load_baselines([newer, FIXTURES / "legacy_0_1.json"], current_run(config=LEGACY_WORKLOAD))
    assert [run.format for run in found.runs] == ["v1", "rlhf-canary-0.1"]
    assert found.runs[1].config_name == "dpo_perf"  # another name than sft-smoke: not held against it
    assert found.notes == []


def test_a_0_1_baseline_without_a_wait_share_is_noted(tmp_path: Path) -> None:
    doc = json.loads((FIXTURES / "legacy_0_1.json").read_text(encoding="utf-8"))
    doc["perf"]["dataloader_wait_pct"] = None
    path = tmp_path / "old.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    found = load_baselines([path], current_run(config=LEGACY_WORKLOAD))
    assert len(found.notes) == 1
    assert found.notes[0].startswith(f"{doc['run_id']}: rlhf-canary 0.1 recorded no data-wait share")


def test_a_0_1_baseline_of_another_model_is_an_error() -> None:
    message = refusal([FIXTURES / "legacy_0_1.json"], current_run(config={**LEGACY_WORKLOAD, "model_name": "gpt2"}))
    assert "(rlhf-canary 0.1) trained another workload: model_name 'EleutherAI/pythia-70m' (current run: 'gpt2')" in (
        message
    )


def test_the_0_1_times_order_with_v1_times(tmp_path: Path) -> None:
    shutil.copy(FIXTURES / "legacy_0_1.json", tmp_path / "old.json")
    baseline(tmp_path / "new.json", 1, "2026-01-01T00:00:00.000Z", config=LEGACY_WORKLOAD)
    found = load_baselines([tmp_path], current_run(config=LEGACY_WORKLOAD))
    assert [run.format for run in found.runs] == ["v1", "rlhf-canary-0.1"]


def test_load_current(tmp_path: Path) -> None:
    path = tmp_path / "metrics.json"
    write_metrics(make_metrics(), path)
    run = load_current(path)
    assert (run.run_id, run.format, run.source) == ("sft-smoke-0", "v1", str(path))


def test_a_0_1_file_cannot_be_the_current_run() -> None:
    with pytest.raises(MetricsFileError) as caught:
        load_current(FIXTURES / "legacy_0_1.json")
    assert not isinstance(caught.value, BaselineError)  # the current run is bad, not a baseline
    assert "the current run must come from this release's `canary run`" in caught.value.render()


@pytest.mark.parametrize("name", ["corrupt.json", "wrong_version.json", "not_object.json"])
def test_a_bad_current_run_is_not_called_a_baseline(name: str) -> None:
    with pytest.raises(MetricsFileError) as caught:
        load_current(FIXTURES / name)
    assert not isinstance(caught.value, BaselineError)
    assert caught.value.fix


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=JSON_VALUES)
def test_arbitrary_json_is_refused_not_a_traceback(tmp_path: Path, value: Any) -> None:
    path = tmp_path / "dir" / "baseline.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(value), encoding="utf-8")
    for attempt in (
        lambda: load_baselines([path], current_run()),
        lambda: load_baselines([path.parent], current_run()),
    ):
        with pytest.raises(BaselineError):
            attempt()
    with pytest.raises(MetricsFileError):
        load_current(path)


LEGACY_SHAPED = st.fixed_dictionaries(
    {"run_id": JSON_VALUES, "perf": JSON_VALUES, "stability": JSON_VALUES},
    optional=dict.fromkeys(("timestamp", "duration_seconds", "env", "config", "profiler", "status"), JSON_VALUES),
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(doc=LEGACY_SHAPED)
def test_arbitrary_0_1_shaped_documents_are_refused_not_a_traceback(tmp_path: Path, doc: dict[str, Any]) -> None:
    path = tmp_path / "legacy.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(BaselineError):
        load_baselines([path], current_run(config=LEGACY_WORKLOAD))
    with pytest.raises(MetricsFileError):
        load_current(path)


def test_no_heavy_imports() -> None:
    code = (
        "import sys, canary_action.compare.baselines, canary_action.compare.legacy; "
        "assert not {'torch', 'transformers', 'trl', 'numpy'} & set(sys.modules), sorted(sys.modules)"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
