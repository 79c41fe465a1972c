"""The history record: read as untrusted data line by line, written with its cap, collected from a run's output."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from canary_action.errors import HistoryError
from canary_action.history.collect import entry_from_output, from_artifacts, pull_request_from_result
from canary_action.history.read import MAX_NOTES, read_history
from canary_action.history.record import MAX_FILE_BYTES, MAX_LINE_BYTES, Entry
from canary_action.history.store import append_entry, write_history
from tests.factories import make_metrics
from tests.history_cases import HOSTILE, REPOSITORY, compared_run, hostile_entry, make_entries, sha, write_entries

REPO = Path(__file__).resolve().parents[2]
#: A real lockstep pair's result (recorded by benchmarks/capture.py): a pull request's effects, as judged.
PAIR_RESULT = REPO / "benchmarks" / "data" / "replay-2026-11-28" / "pair-off-dpo" / "result.json"


def lines_of(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_a_written_history_reads_back_equal(tmp_path: Path) -> None:
    entries = make_entries(30, configs=2)
    history = read_history(write_entries(tmp_path / "history.jsonl", entries))
    assert history.repository == REPOSITORY
    assert history.configs() == ["canary-0", "canary-1"]
    assert sorted(history.entries, key=lambda e: e.commit) == sorted(entries, key=lambda e: e.commit)
    assert history.notes == []


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"config": HOSTILE}, "line 2: config: String should match pattern"),
        ({"commit": "<script>"}, "line 2: commit: String should match pattern"),
        ({"repository": "acme/<b>x</b>"}, "line 2: repository: String should match pattern"),
        ({"figures": {"step_time_s": 1e300}}, "line 2: figures.step_time_s: Input should be less than or equal to"),
        ({"figures": {"step_time_s": float("nan")}}, "line 2: figures.step_time_s: Input should be a finite number"),
        ({"verdict": "fine"}, "line 2: verdict: Input should be"),
        ({"env": {"gpu": "x" * 201}}, "line 2: env.gpu: String should have at most 200 characters"),
        ({"unknown": 1}, "line 2: unknown: a key this version does not know"),
        ({"\x1b]8;;https://evil\x1b\\" + HOSTILE: 1}, "line 2: ?: a key this version does not know"),
        ({"kind": HOSTILE + "\x1b[2J"}, "line 2: kind: not entry or month"),
        ({"date": "2025-13-40T99:99:99Z"}, "line 2: date: Value error, not a real UTC time"),
        ({"run_id": 10**40}, "line 2: run_id: Input should be less than or equal to"),
    ],
)
def test_a_bad_line_is_left_out_with_a_note_that_quotes_none_of_it(
    tmp_path: Path, change: dict[str, object], said: str
) -> None:
    good = make_entries(2)
    bad = {**json.loads(good[1].model_dump_json()), **change}
    path = tmp_path / "history.jsonl"
    path.write_text(good[0].model_dump_json() + "\n" + json.dumps(bad) + "\n", encoding="utf-8")
    history = read_history(path)
    assert history.entries == [good[0]]
    assert len(history.notes) == 1
    assert history.notes[0].startswith(said), history.notes
    assert "<" not in history.notes[0]
    assert all(c.isprintable() for c in history.notes[0])
    assert "x" * 50 not in history.notes[0]


def test_junk_lines_a_huge_line_and_another_repository_are_left_out(tmp_path: Path) -> None:
    good = make_entries(3)
    other = good[2].model_copy(update={"repository": "evil/fork"})
    huge = json.loads(good[1].model_dump_json()) | {"env": {"gpu": "A" * 10_000_000}}
    path = tmp_path / "history.jsonl"
    path.write_text(
        "\n".join([good[0].model_dump_json(), "not json {", json.dumps(huge), "[" * 100_000,
                   "1" * 5000, other.model_dump_json(), good[1].model_dump_json(), ""]),
        encoding="utf-8",
    )  # fmt: skip
    history = read_history(path, repository=REPOSITORY)
    assert history.entries == [good[0], good[1]]
    assert history.notes == [
        "line 2: not JSON",
        f"line 3: {len(json.dumps(huge)):,} bytes, over the {MAX_LINE_BYTES:,} a line may hold",
        "line 4: not JSON",
        "line 5: not JSON",
        "line 6: names the repository evil/fork, not acme/trainer",
    ]


def test_lines_naming_several_repositories_need_one_chosen(tmp_path: Path) -> None:
    good = make_entries(2)
    path = write_entries(tmp_path / "h.jsonl", [good[0], good[1].model_copy(update={"repository": "evil/fork"})])
    with pytest.raises(HistoryError, match=r"2 repositories \(acme/trainer, evil/fork\)") as refused:
        read_history(path)
    assert "--repository" in refused.value.fix
    assert read_history(path, repository="evil/fork").entries == [
        good[1].model_copy(update={"repository": "evil/fork"})
    ]


def test_notes_are_capped_and_counted(tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    path.write_text("junk\n" * 500 + make_entries(1)[0].model_dump_json() + "\n", encoding="utf-8")
    history = read_history(path)
    assert len(history.entries) == 1
    assert history.left_out == 500
    assert len(history.summary_notes()) == MAX_NOTES + 1
    assert history.summary_notes()[-1] == f"... and {500 - MAX_NOTES} more lines left out"


def test_a_link_a_folder_a_missing_or_an_oversized_file_is_refused(tmp_path: Path) -> None:
    target = write_entries(tmp_path / "real.jsonl", make_entries(1))
    (tmp_path / "link.jsonl").symlink_to(target)
    with pytest.raises(HistoryError, match="a link or not a regular file"):
        read_history(tmp_path / "link.jsonl")
    with pytest.raises(HistoryError, match="no such file"):
        read_history(tmp_path / "missing.jsonl")
    big = tmp_path / "big.jsonl"
    with big.open("wb") as out:
        out.truncate(MAX_FILE_BYTES + 1)
    with pytest.raises(HistoryError, match="over the 16,777,216 a history may hold"):
        read_history(big)


def test_a_duplicated_line_is_kept_once(tmp_path: Path) -> None:
    entry = make_entries(1)[0]
    path = tmp_path / "h.jsonl"
    path.write_text((entry.model_dump_json() + "\n") * 2, encoding="utf-8")
    history = read_history(path)
    assert history.entries == [entry]
    assert history.notes == ["line 2: the same entry as an earlier line (canary-0): the first kept"]


def test_append_creates_replaces_a_rerun_and_rolls_the_oldest_months_past_the_cap(tmp_path: Path) -> None:
    path = tmp_path / "branch" / "history.jsonl"
    entries = make_entries(100)  # one a day from 2026-01-01: January to April
    for entry in entries[:99]:
        assert append_entry(path, entry, keep=1000) == []
    rerun = entries[50].model_copy(update={"verdict": "neutral"})
    assert append_entry(path, rerun, keep=1000) == [f"replaced the entry of workflow run {rerun.run_id} (a re-run)"]
    assert read_history(path).entries[50].verdict == "neutral"

    notes = append_entry(path, entries[99], keep=60)  # 100 entries: January (31) and February (28) rolled
    assert notes == ["canary-0: rolled 2026-01 into one line (over 60 entries)",
                     "canary-0: rolled 2026-02 into one line (over 60 entries)"]  # fmt: skip
    history = read_history(path)
    assert [m.month for m in history.months] == ["2026-01", "2026-02"]
    assert len(history.entries) == 100 - 31 - 28
    january = history.months[0]
    assert january.num_runs == 31
    assert january.last_commit == entries[30].commit
    assert january.num_regressions == sum(e.verdict == "regression" for e in entries[:31])
    assert [pr.number for pr in january.pull_requests] == [
        e.pull_request.number for e in entries[:31] if e.pull_request
    ]
    times = sorted(e.figures.step_time_s for e in entries[:31] if e.figures.step_time_s is not None)
    assert january.figures.step_time_s == times[15]  # the median of 31
    kinds = [line["kind"] for line in lines_of(path)]
    assert kinds == ["month", "month", *["entry"] * 41]


def test_append_drops_the_lines_it_cannot_read_and_says_so(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    first, second = make_entries(2)
    path.write_text(first.model_dump_json() + "\nnot json\n", encoding="utf-8")
    assert append_entry(path, second) == ["line 2: not JSON: dropped from the file"]
    assert [line["commit"] for line in lines_of(path)] == [first.commit, second.commit]


def test_the_newest_month_is_never_rolled(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    entries = [
        e.model_copy(update={"date": f"2026-03-{1 + i % 28:02d}T{i // 28:02d}:00:00Z"})
        for i, e in enumerate(make_entries(40))
    ]
    write_history(path, entries[:39])
    assert append_entry(path, entries[39], keep=10) == []
    assert len(read_history(path).entries) == 40


def test_an_entry_holds_the_runs_judged_summaries(tmp_path: Path) -> None:
    out = compared_run(tmp_path)
    result = json.loads((out / "result.json").read_text(encoding="utf-8"))
    metrics = make_metrics(seed=9)
    entry = entry_from_output(out, repository=REPOSITORY, event="push", run_id=42)
    assert entry.commit == metrics.run.git_sha
    assert entry.config == "sft-smoke"
    assert entry.date == metrics.run.started_at.replace(".000", "")
    assert entry.verdict == result["verdict"]
    assert entry.failed == [c["name"] for c in result["checks"] if c["status"] == "fail"]
    assert metrics.summary is not None
    assert metrics.summary.step_time_s is not None
    assert entry.figures.step_time_s == metrics.summary.step_time_s.median
    assert entry.figures.step_time_noise_s == metrics.summary.step_time_s.mad
    assert entry.figures.tokens_per_s == metrics.summary.tokens_per_s
    assert entry.figures.tail_loss == metrics.summary.tail_mean_loss
    assert entry.env.torch == metrics.env.torch
    assert entry.run_id == 42


def test_a_pairs_result_is_a_pull_request_never_an_entry(tmp_path: Path) -> None:
    merged = pull_request_from_result(PAIR_RESULT, number=12)
    recorded = json.loads(PAIR_RESULT.read_text(encoding="utf-8"))
    step = next(c for c in recorded["checks"] if c["name"] == "step_time")
    effect = merged.effect("step_time")
    assert effect is not None
    assert (effect.delta_pct, effect.low, effect.high) == (
        step["delta_pct"],
        step["interval"]["low"],
        step["interval"]["high"],
    )
    assert merged.number == 12
    folder = tmp_path / "pair"
    folder.mkdir()
    (folder / "result.json").write_bytes(PAIR_RESULT.read_bytes())
    with pytest.raises(HistoryError, match="a lockstep pair's result"):
        entry_from_output(folder, repository=REPOSITORY, event="push")
    with pytest.raises(HistoryError, match="not a lockstep pair's result"):
        pull_request_from_result(compared_run(tmp_path) / "result.json", number=1)


def test_artifacts_give_entries_and_their_pull_requests_and_notes_for_the_rest(tmp_path: Path) -> None:
    artifacts = tmp_path / "artifacts"
    run = compared_run(tmp_path)
    (artifacts / "nightly-1").mkdir(parents=True)
    run.rename(artifacts / "nightly-1" / "canary-output")
    pair = json.loads(PAIR_RESULT.read_text(encoding="utf-8"))
    for name, started in (("pr-7", "2026-01-01T00:00:00Z"), ("pr-8", "2026-12-01T00:00:00Z")):
        pair["current"] |= {"config_name": "sft-smoke", "started_at": started}
        (artifacts / name).mkdir()
        (artifacts / name / "result.json").write_text(json.dumps(pair), encoding="utf-8")
    (artifacts / "junk").mkdir()
    (artifacts / "junk" / "result.json").write_text("<html>", encoding="utf-8")
    (artifacts / "link").symlink_to(artifacts / "nightly-1", target_is_directory=True)
    found = from_artifacts(artifacts, repository=REPOSITORY)
    [entry] = found.entries  # the link was not followed into a second copy
    assert entry.event == "artifact"
    assert entry.pull_request is not None  # pr-7's pair, marked on the first run after it
    assert entry.pull_request.effect("step_time") == pull_request_from_result(PAIR_RESULT, number=None).effect(
        "step_time"
    )
    assert len(found.notes) == 2
    assert found.notes[0].startswith("junk/result.json: left out (")
    assert found.notes[1] == "a pair of sft-smoke on 2026-12-01 has no later run of it to be marked on"


def test_the_hostile_entry_is_valid_data(tmp_path: Path) -> None:
    entry = hostile_entry()
    assert Entry.model_validate_json(entry.model_dump_json()) == entry
    assert sha(1) != sha(2)


def test_a_pairs_effects_travel_hidden_in_its_check_run_text_and_are_read_back_strictly(tmp_path: Path) -> None:
    from canary_action.github.step import _carry_effects
    from canary_action.history.collect import effects_from_text, pull_request_of
    from canary_action.report.load import read_result
    from canary_action.report.render import check_output

    pair = read_result(PAIR_RESULT)
    output = check_output(pair)
    shown = output["text"]
    _carry_effects(output, pair)
    assert output["text"].startswith(shown)
    assert effects_from_text(output["text"]) == pull_request_of(pair, None).effects
    single = read_result(compared_run(tmp_path) / "result.json")
    plain = check_output(single)
    _carry_effects(plain, single)
    assert "rlhf-canary:effects" not in plain["text"]  # no pair, no effects
    forged = '<!-- rlhf-canary:effects [{"check": "step_time", "status": "pass", "delta_pct": 1e300}] -->'
    assert effects_from_text("text\n\n" + forged) is None
    many = json.dumps([{"check": "step_time", "status": "pass", "delta_pct": 1.0}] * 17)
    assert effects_from_text(f"<!-- rlhf-canary:effects {many} -->") is None
    assert effects_from_text("<!-- rlhf-canary:effects [not json] -->") is None
    assert effects_from_text("no marker") is None


def test_a_line_of_a_newer_schema_is_kept_as_it_is_never_dropped(tmp_path: Path) -> None:
    first, second = make_entries(2)
    newer = json.dumps({**json.loads(first.model_dump_json()), "schema_version": 2, "new_field": [1, 2]})
    path = tmp_path / "history.jsonl"
    path.write_text(first.model_dump_json() + "\n" + newer + "\n", encoding="utf-8")
    notes = append_entry(path, second)
    assert notes == ["line 2: written by a newer rlhf-canary (schema_version above 1): kept as it is, not drawn"]
    assert newer in path.read_text(encoding="utf-8").splitlines()
    assert read_history(path).entries == [first, second]


def test_what_the_reader_would_refuse_is_never_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from canary_action.history import store

    path = tmp_path / "history.jsonl"
    entries = make_entries(30)
    write_entries(path, entries[:29])
    before = path.read_bytes()
    monkeypatch.setattr(store, "MAX_FILE_BYTES", len(before) + 100)  # the 30th entry would pass it
    with pytest.raises(HistoryError, match=r"over the [0-9,]+ a history or the 524,288 a line may hold") as refused:
        append_entry(path, entries[29])
    assert "--keep" in refused.value.fix
    assert path.read_bytes() == before
