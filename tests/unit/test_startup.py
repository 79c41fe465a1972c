"""Where the time before step 1 goes (train/stages.py StageLog): each stage's own time, nested ones apart."""

from __future__ import annotations

import pytest

from canary_action.train import stages
from canary_action.train.stages import StageLog, stage


def test_each_stage_counts_its_own_time_and_the_trainer_its_setup(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stages, "process_started", lambda: 5.0)
    log = StageLog()
    log.events = [
        ("preflight", True, 10.0), ("preflight", False, 11.0), ("build", True, 11.0), ("load_model", True, 12.0),
        ("load_model", True, 12.5), ("load_model", False, 13.0),  # the tokenizer, inside the model's stage
        ("load_model", False, 14.0), ("load_data", True, 14.0), ("load_data", False, 15.0), ("build", False, 16.0),
        ("train", True, 16.0),
    ]  # fmt: skip
    assert log.startup(first_step_at=18.0) == {
        "process": 5.0, "preflight": 1.0, "build": 2.0, "load_model": 2.0, "load_data": 1.0, "trainer_setup": 2.0,
        "to_step_1": 13.0,
    }  # fmt: skip
    assert log.startup(first_step_at=None) == {}


def test_stages_are_recorded_only_inside_a_log() -> None:
    with stage("preflight"):
        pass
    with StageLog() as log, stage("build"), stage("load_model"):
        pass
    assert [(name, entered) for name, entered, _ in log.events] == [
        ("build", True),
        ("load_model", True),
        ("load_model", False),
        ("build", False),
    ]
