"""What a run says while and after it runs (issue 15 item 12-13): a line per stage before step 1, the time left on
each progress line, a profiler window the run stopped before, what an interrupt kept, and no empty folders."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from canary_action.cli import _interrupted_message
from canary_action.config.blocks import ProfilerConfig
from canary_action.config.load import parse_config
from canary_action.errors import RunInterrupted
from canary_action.metrics import schema as m
from canary_action.train.callback import RunRecord
from canary_action.train.profiler import ProfilerWindow
from canary_action.train.progress import ProgressLine, StageLines, duration_text, eta_s
from canary_action.train.setup import TRAINER_DIR, drop_empty_trainer_dir
from canary_action.train.stages import announce_stages, reset_stage, stage

CONFIG = {"name": "t", "training_type": "sft", "model_name": "builtin:tiny-llama", "dataset_name": "builtin:sft"}


def rows(*times: float | None) -> list[dict[str, float | None]]:
    return [{m.STEP_TIME_S: t} for t in times]


# --- the time left ------------------------------------------------------------------------------------------


def test_eta_is_the_remaining_steps_at_the_recent_median_pace() -> None:
    slow_start = rows(5.0, 5.0, *[1.0] * 10)  # the warm-up has left the window of recent steps
    assert eta_s(slow_start, 30) == 30.0
    assert eta_s(rows(1.0, None, 3.0, 100.0), 10) == 30.0  # untimed steps skipped; one outlier does not swing it
    assert eta_s(rows(1.0), 0) is None  # done
    assert eta_s(rows(None), 5) is None  # nothing timed yet


@pytest.mark.parametrize(
    ("seconds", "text"), [(0.2, "<1 s"), (44.6, "45 s"), (185, "3 min 05 s"), (3725, "1 h 02 min")]
)
def test_durations_read_at_a_glance(seconds: float, text: str) -> None:
    assert duration_text(seconds) == text


def test_progress_lines_carry_the_eta_except_the_last(capsys: pytest.CaptureFixture[str]) -> None:
    record = RunRecord()
    line = ProgressLine(record, max_steps=4, name="t")
    for step in (1, 4):
        record.rows.append({m.STEP: float(step), m.STEP_TIME_S: 2.0, m.NUM_TOKENS: 10.0, m.LOSS: 1.0})
        line.on_log(None, SimpleNamespace(global_step=step), None)  # type: ignore[arg-type]  # what it reads
    first, last = capsys.readouterr().err.splitlines()
    assert first.startswith("[t] step 1/4 |")
    assert first.endswith("| ETA 6 s")
    assert last.startswith("[t] step 4/4 |")
    assert "ETA" not in last


def test_a_lockstep_sides_lines_say_which_side_they_are(capsys: pytest.CaptureFixture[str]) -> None:
    """Both sides of a pair log to one stderr: `[t base]` and `[t head]`, not `[t]` twice with other numbers."""
    config = parse_config({**CONFIG, "max_steps": 4}, source="x").config
    record = RunRecord()
    reset_stage()
    with announce_stages(StageLines(config, "t head")), stage("train"):
        record.rows.append({m.STEP: 1.0, m.STEP_TIME_S: 2.0, m.NUM_TOKENS: 10.0, m.LOSS: 1.0})
        ProgressLine(record, max_steps=4, name="t head").on_log(None, SimpleNamespace(global_step=1), None)  # type: ignore[arg-type]
    announced, progress = capsys.readouterr().err.splitlines()
    assert announced == "[t head] training 4 steps"
    assert progress.startswith("[t head] step 1/4 |")


# --- what is loading ----------------------------------------------------------------------------------------


def test_each_stage_of_the_start_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    config = parse_config({**CONFIG, "max_steps": 7, "dataset_size": 1500}, source="x").config
    reset_stage()
    with announce_stages(StageLines(config)):
        with stage("preflight"):
            pass
        with stage("build"):
            with stage("load_model"):  # the tokenizer, loaded for the data below, re-enters this stage
                pass
            with stage("load_data"), stage("load_model"):
                pass
            with stage("load_model"):  # the model itself: announced already
                pass
        with stage("train"):
            pass
    with stage("build"):  # outside the block: nobody is listening
        pass
    assert capsys.readouterr().err.splitlines() == [
        "[t] building the sft trainer",
        "[t]   loading the model builtin:tiny-llama",
        "[t]   loading the data builtin:sft (1,500 examples)",
        "[t] training 7 steps",
    ]


# --- a profiler window the run stopped before ---------------------------------------------------------------


def window(tmp_path: Path, **recorded: Any) -> ProfilerWindow:
    profiler = ProfilerWindow(ProfilerConfig(enabled=True, start_step=4, num_steps=3), tmp_path, on_cuda=False)
    if recorded:
        profiler.summary = m.ProfilerSummary(
            trace_path="t.json", start_step=4, cpu_time_total_ms=1.0, device_time_total_ms=0.0, top_ops=[], **recorded
        )
    return profiler


def test_a_window_recorded_whole_needs_no_word(tmp_path: Path) -> None:
    assert window(tmp_path, end_step=6).shortfall(m.Status(state="completed"), 8) is None


def test_a_run_that_stopped_before_the_window_says_it_recorded_nothing(tmp_path: Path) -> None:
    stopped = m.Status(state="stopped_early", reason="non_finite", step=2)
    assert window(tmp_path).shortfall(stopped, 2) == (
        "profiler: nothing recorded: the run stopped early (non_finite) after 2 steps, before the profiler window "
        "(steps 4-6)"
    )
    crashed = m.Status(state="failed", reason="error", exception_type="PlantedCrashError")
    assert window(tmp_path).shortfall(crashed, 4) == (
        "profiler: nothing recorded: the run failed (PlantedCrashError) after 4 steps, inside the profiler window "
        "(steps 4-6), before its trace was written"
    )


def test_a_run_that_stopped_inside_the_window_says_what_it_recorded(tmp_path: Path) -> None:
    timeout = m.Status(state="stopped_early", reason="timeout", step=5)
    assert window(tmp_path, end_step=5).shortfall(timeout, 5) == (
        "profiler: recorded steps 4-5 of the window 4-6 only: the run stopped early (timeout) after 5 steps"
    )
    interrupted = m.Status(state="failed", reason="interrupted", exception_type="KeyboardInterrupt")
    assert "the run was interrupted after 1 step," in (window(tmp_path).shortfall(interrupted, 1) or "")


# --- what a run leaves --------------------------------------------------------------------------------------


def test_the_trainers_empty_folder_is_removed_and_a_used_one_kept(tmp_path: Path) -> None:
    (tmp_path / "a" / TRAINER_DIR).mkdir(parents=True)
    drop_empty_trainer_dir(tmp_path / "a")
    assert not (tmp_path / "a" / TRAINER_DIR).exists()
    (tmp_path / "b" / TRAINER_DIR / "completions").mkdir(parents=True)
    drop_empty_trainer_dir(tmp_path / "b")
    assert (tmp_path / "b" / TRAINER_DIR / "completions").is_dir()
    drop_empty_trainer_dir(tmp_path / "c")  # none made (another rank removed it): nothing to do


def test_an_interrupt_says_what_the_run_kept_and_where(tmp_path: Path) -> None:
    for name in ("metrics.json", "steps.jsonl", "error.log"):
        (tmp_path / name).write_text("x", encoding="utf-8")
    message = _interrupted_message(RunInterrupted(tmp_path, KeyboardInterrupt()))
    assert message.splitlines() == [
        f"interrupted (Ctrl-C): what the run measured so far is kept in {tmp_path}",
        "  metrics.json  what was measured, with status failed (interrupted)",
        "  steps.jsonl   one row per finished step",
        "  error.log     the traceback: where it stopped",
    ]


def test_an_interrupted_pair_lists_each_sides_files(tmp_path: Path) -> None:
    for side in ("base", "head"):
        (tmp_path / side).mkdir()
        (tmp_path / side / "metrics.json").write_text("x", encoding="utf-8")
    (tmp_path / "pair.json").write_text("x", encoding="utf-8")
    message = _interrupted_message(RunInterrupted(tmp_path, KeyboardInterrupt("signal 15")))
    assert message.splitlines()[0].startswith("interrupted (SIGTERM): ")
    assert [line.split()[0] for line in message.splitlines()[1:]] == [
        "pair.json", "base/metrics.json", "head/metrics.json",
    ]  # fmt: skip


def test_an_interrupt_outside_a_run_says_only_that(tmp_path: Path) -> None:
    assert _interrupted_message(None) == "interrupted (Ctrl-C)"
    assert _interrupted_message(KeyboardInterrupt("signal 15")) == "interrupted (SIGTERM)"
    assert _interrupted_message(RunInterrupted(tmp_path, KeyboardInterrupt())) == (
        f"interrupted (Ctrl-C): nothing was written to {tmp_path} yet"
    )
