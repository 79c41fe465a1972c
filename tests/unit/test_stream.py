"""The per-step stream and the rebuild of a killed run's metrics.json (metrics/stream.py)."""

from __future__ import annotations

from pathlib import Path

from canary_action.metrics import schema as m
from canary_action.metrics.io import read_metrics, write_metrics
from canary_action.metrics.stream import KILLED, STEPS_FILE, append_rows, rank_steps_path, read_rows, rebuild_killed
from tests.factories import make_metrics, make_series


def _provisional(run_dir: Path) -> m.Metrics:
    status = m.Status(state="failed", reason=KILLED, stage="preflight", message="killed")
    metrics = make_metrics(summary=None, status=status).model_copy(update={"series": {}})
    write_metrics(metrics, run_dir / "metrics.json")
    return metrics


def _rows(n: int) -> list[dict[str, float | None]]:
    columns = make_series(n, step_time_s=0.1, seed=1)
    return [{name: values[i] for name, values in columns.items()} for i in range(n)]


def test_a_killed_run_is_rebuilt_with_the_steps_it_streamed(tmp_path: Path) -> None:
    _provisional(tmp_path)
    append_rows(tmp_path / STEPS_FILE, _rows(7))
    with (tmp_path / STEPS_FILE).open("a") as f:
        f.write('{"step": 8, "perf/step_ti')  # the process died in the middle of this line

    rebuilt = rebuild_killed(tmp_path)

    assert rebuilt is not None
    on_disk = read_metrics(tmp_path / "metrics.json")
    assert on_disk.series[m.STEP] == [float(s) for s in range(1, 8)]
    assert (on_disk.status.state, on_disk.status.reason, on_disk.status.step, on_disk.status.stage) == (
        "failed",
        KILLED,
        8,
        "train",
    )
    assert on_disk.summary is not None
    assert any("rebuilt from steps.jsonl" in n for n in on_disk.notices)


def test_a_run_killed_before_its_first_step_keeps_its_stage(tmp_path: Path) -> None:
    _provisional(tmp_path)
    rebuilt = rebuild_killed(tmp_path)
    assert rebuilt is not None
    assert (rebuilt.status.step, rebuilt.status.stage, rebuilt.summary) == (1, "preflight", None)


def test_a_finished_run_and_a_missing_one_are_left_alone(tmp_path: Path) -> None:
    assert rebuild_killed(tmp_path) is None
    finished = make_metrics()
    write_metrics(finished, tmp_path / "metrics.json")
    append_rows(tmp_path / STEPS_FILE, _rows(3))
    assert rebuild_killed(tmp_path) is None
    assert read_metrics(tmp_path / "metrics.json") == finished


def test_rows_round_trip_as_columns(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    append_rows(path, [{"a": 1.0, "b": None}])
    append_rows(path, [{"a": 2.0, "c": 3.0}])
    assert read_rows(path) == {"a": [1.0, 2.0], "b": [None, None], "c": [None, 3.0]}


def test_a_killed_launcher_is_rebuilt_from_its_ranks_streams(tmp_path: Path) -> None:
    """num_processes > 1: the ranks streamed into ranks/, the launcher died before merging them."""
    status = m.Status(state="failed", reason=KILLED, stage="train", message="killed")
    provisional = make_metrics(summary=None, status=status).model_copy(update={"series": {}})
    provisional = provisional.model_copy(update={"config": {**provisional.config, "num_processes": 2}})
    write_metrics(provisional, tmp_path / "metrics.json")
    for rank in (0, 1):
        append_rows(rank_steps_path(tmp_path / "ranks", rank), _rows(5 if rank == 0 else 4))

    rebuilt = rebuild_killed(tmp_path)

    assert rebuilt is not None
    assert rebuilt.series[m.STEP] == [1.0, 2.0, 3.0, 4.0, 5.0]
    assert (rebuilt.status.reason, rebuilt.status.step) == (KILLED, 6)
