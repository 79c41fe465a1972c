"""The public Python API (canary_action.api): its surface, frozen here, and what each function does."""

from __future__ import annotations

import dataclasses
import inspect
import json
import subprocess
import sys
import typing
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from canary_action import api
from canary_action.cli import cli
from canary_action.errors import (
    BaselineError,
    ConfigError,
    MetricsFileError,
    NoBaselineError,
    TemplateError,
    TrainingError,
    UsageError,
)
from canary_action.metrics import schema
from canary_action.metrics.io import write_metrics
from canary_action.metrics.schema import Metrics, ProfiledOp, ProfilerSummary
from canary_action.report.view import Links
from tests.factories import make_metrics, make_series

ROOT = Path(__file__).parents[2]
LEGACY = ROOT / "tests" / "fixtures" / "baselines" / "legacy_0_1.json"
LEGACY_BAD = ROOT / "tests" / "fixtures" / "baselines" / "legacy_bad.json"
TINY_SFT = ROOT / "configs" / "tiny" / "sft.yaml"


def test_the_api_is_frozen() -> None:
    """Every public name and signature (notebooks and users' scripts call them). A change here is a release note."""
    functions = {
        name: str(inspect.signature(obj)) for name in api.__all__ if inspect.isfunction(obj := api.__dict__[name])
    }
    assert functions == {
        "compare": "(current: 'str | os.PathLike[str]', baselines: 'str | os.PathLike[str] | Sequence[str | "
        "os.PathLike[str]]', *, tier: 'Tier' = 'default', threshold_file: 'str | os.PathLike[str] | None' = None, "
        "allow_change: 'Sequence[str]' = (), accept_numerics_change: 'bool' = False) -> 'CompareResult'",
        "diff_profiles": "(before: 'str | os.PathLike[str] | Metrics | Run', after: 'str | os.PathLike[str] | "
        "Metrics | Run', *, top: 'int' = 10) -> 'list[OpChange]'",
        "load_config": "(source: 'str | os.PathLike[str] | Mapping[str, Any]', *, overrides: 'Sequence[str]' = ()) "
        "-> 'LoadedConfig'",
        "load_metrics": "(path: 'str | os.PathLike[str]') -> 'Metrics'",
        "load_run": "(path: 'str | os.PathLike[str]') -> 'Run'",
        "render": "(result: 'CompareResult', format: 'ReportFormat' = 'markdown', *, templates: 'str | "
        "os.PathLike[str] | None' = None, colour: 'bool' = False, links: 'Links | None' = None) -> 'str'",
        "run": "(config: 'str | os.PathLike[str] | Mapping[str, Any] | LoadedConfig', *, output_dir: 'str | "
        "os.PathLike[str] | None' = None, overrides: 'Sequence[str]' = ()) -> 'RunOutcome'",
    }
    types = sorted(set(api.__all__) - set(functions))
    assert types == ["CompareResult", "Links", "LoadedConfig", "Metrics", "OpChange", "ReportFormat", "Run",
                     "RunOutcome", "Tier"]  # fmt: skip
    assert [f.name for f in api.RunOutcome.__dataclass_fields__.values()] == ["run_dir", "metrics_path", "metrics"]
    assert typing.get_args(api.ReportFormat) == ("comment", "check", "summary", "markdown", "terminal")
    for name in functions:  # every annotation resolves: the API type-checks in users' code
        typing.get_type_hints(api.__dict__[name])
        assert "Example::" in (api.__dict__[name].__doc__ or ""), name


def test_importing_the_api_is_light() -> None:
    code = (
        "import sys, canary_action.api\n"
        "heavy = sorted({'torch', 'transformers', 'trl', 'numpy'} & set(sys.modules))\n"
        "assert not heavy, heavy\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False, cwd=ROOT)
    assert done.returncode == 0, done.stderr


# --- loading ---------------------------------------------------------------------------------------------------


def sample(seed: int, step_time_s: float = 0.1, **overrides: Any) -> Metrics:
    """One run of the same canary: the same data, seed and batches (make_metrics varies them with `seed`, which
    here only draws the timing noise)."""
    same_batches = {schema.NUM_TOKENS: make_series(60)[schema.NUM_TOKENS]}
    return make_metrics(num_steps=60, step_time_s=step_time_s, seed=seed, series=same_batches,
                        workload={"dataset_fingerprint": "d" * 64}, config={"seed": 0}, **overrides)  # fmt: skip


def written(path: Path, metrics: Metrics) -> Path:
    write_metrics(metrics, path)
    return path


def test_load_metrics_reads_ours_and_points_0_1_files_at_load_run(tmp_path: Path) -> None:
    metrics = make_metrics()
    assert api.load_metrics(written(tmp_path / "m.json", metrics)) == metrics
    assert api.load_metrics(str(tmp_path / "m.json")) == metrics
    with pytest.raises(MetricsFileError, match=r"rlhf-canary 0\.1 metrics\.json") as legacy:
        api.load_metrics(LEGACY)
    assert "api.load_run" in legacy.value.fix
    with pytest.raises(MetricsFileError, match=r"missing\.json does not exist"):
        api.load_metrics(tmp_path / "missing.json")
    (tmp_path / "broken.json").write_text("{", encoding="utf-8")
    with pytest.raises(MetricsFileError) as broken:
        api.load_metrics(tmp_path / "broken.json")
    assert "load_run" not in broken.value.fix


def test_load_run_reads_both_formats_as_the_comparison_does(tmp_path: Path) -> None:
    ours = api.load_run(written(tmp_path / "m.json", make_metrics(step_time_s=0.2)))
    assert isinstance(ours, api.Run)
    assert ours.format == "v1"
    assert ours.run_id == "sft-smoke-0"
    assert ours.steady_step_times is not None
    assert ours.step_time_median == pytest.approx(0.2, rel=0.05)
    old = api.load_run(LEGACY)
    assert old.format == "rlhf-canary-0.1"
    assert old.steady_step_times is None  # summaries only
    assert old.step_time_median == pytest.approx(0.4055943401874226 * 1.032)  # 0.1's wait gap put back
    with pytest.raises(BaselineError, match=r"looks like an rlhf-canary 0\.1 metrics\.json"):
        api.load_run(LEGACY_BAD)
    (tmp_path / "other.json").write_text('{"hello": 1}', encoding="utf-8")
    with pytest.raises(MetricsFileError, match="no schema_version"):
        api.load_run(tmp_path / "other.json")


def test_load_config_from_a_file_or_a_mapping(tmp_path: Path) -> None:
    loaded = api.load_config(TINY_SFT, overrides=["max_steps=8"])
    assert loaded.config.max_steps == 8
    assert loaded.path == TINY_SFT
    assert any("max_steps" in notice for notice in loaded.notices)
    mapping = {"name": "mine", "training_type": "sft", "model_name": "builtin:tiny-llama",
               "dataset_name": "builtin:sft-messages", "max_steps": 5}  # fmt: skip
    from_data = api.load_config(mapping, overrides="batch_size=2")  # one override alone is one, not characters
    assert (from_data.config.name, from_data.config.batch_size, from_data.path) == ("mine", 2, None)
    assert mapping["max_steps"] == 5  # the caller's mapping is not changed
    with pytest.raises(ConfigError) as bad:
        api.load_config({**mapping, "max_stepz": 3, "batch_size": "two"})
    assert any("did you mean `max_steps`" in e for e in bad.value.errors)
    assert any("batch_size" in e for e in bad.value.errors)
    with pytest.raises(ConfigError):
        api.load_config(tmp_path / "missing.yaml")


# --- comparing -------------------------------------------------------------------------------------------------


def history(tmp_path: Path) -> Path:
    folder = tmp_path / "baselines"
    for seed in (1, 2, 3):
        written(folder / f"b{seed}.json", sample(seed))
    return folder


def test_compare_judges_as_canary_compare_does(tmp_path: Path) -> None:
    folder = history(tmp_path)
    fine = written(tmp_path / "fine.json", sample(4))
    slow = written(tmp_path / "slow.json", sample(4, step_time_s=0.13))
    assert api.compare(fine, folder).verdict == "pass"
    result = api.compare(str(slow), [folder / "b1.json", folder / "b2.json", str(folder / "b3.json")])
    assert result.verdict == "regression"
    assert result.suspects, "a regression comes with its likely causes"
    confidences = [s.confidence for s in result.suspects]
    assert confidences == sorted(confidences, reverse=True)  # no NaN here: ranked by confidence
    # The same judgement as the command's --json (the result, field for field).
    done = CliRunner().invoke(cli, ["compare", str(slow), str(folder), "--json"])
    assert done.exit_code == 1, done.output
    assert api.CompareResult.model_validate_json(done.stdout) == api.compare(slow, folder)


def test_compare_options_and_errors(tmp_path: Path) -> None:
    folder = history(tmp_path)
    current = written(tmp_path / "current.json", sample(4, step_time_s=0.108))
    strict = tmp_path / "strict.yaml"
    strict.write_text("max_step_time_increase_pct: 1\n", encoding="utf-8")
    result = api.compare(current, folder, tier="smoke", threshold_file=strict, allow_change=["max_length"])
    assert result.tier == "smoke"
    assert any(str(strict) in source for source in result.threshold_sources)
    with pytest.raises(UsageError, match="not a threshold tier"):
        api.compare(current, folder, tier="fast")  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="did you mean `max_length`"):
        api.compare(current, folder, allow_change=["max_lenght"])
    with pytest.raises(UsageError, match="no baseline given"):
        api.compare(current, [])
    (tmp_path / "empty").mkdir()
    with pytest.raises(NoBaselineError):
        api.compare(current, tmp_path / "empty")
    with pytest.raises(MetricsFileError, match=r"current run must come from this release"):
        api.compare(LEGACY, folder)


def test_compare_reads_a_0_1_baseline(tmp_path: Path) -> None:
    old_workload = {"model_name": "EleutherAI/pythia-70m", "dataset_name": "Anthropic/hh-rlhf"}
    current = written(tmp_path / "current.json", make_metrics(config=old_workload))
    result = api.compare(current, LEGACY)
    assert [b.format for b in result.baselines] == ["rlhf-canary-0.1"]


# --- rendering -------------------------------------------------------------------------------------------------


@pytest.fixture
def regression(tmp_path: Path) -> api.CompareResult:
    slow = written(tmp_path / "slow.json", sample(4, step_time_s=0.13))
    return api.compare(slow, history(tmp_path))


@pytest.mark.parametrize("kind", ["comment", "check", "summary", "markdown", "terminal"])
def test_render_is_canary_report(kind: str, regression: api.CompareResult, tmp_path: Path) -> None:
    result_file = tmp_path / "result.json"
    result_file.write_text(regression.model_dump_json(), encoding="utf-8")
    args = ["report", str(result_file), "--format", kind, "--repo", "octo-org/repo", "--pr", "12"]
    done = CliRunner().invoke(cli, args)
    assert done.exit_code == 0, done.output
    text = api.render(regression, kind, links=Links(repository="octo-org/repo", pull_request=12))  # type: ignore[arg-type]
    assert text == done.stdout
    assert "octo-org/repo" in text
    if kind == "check":
        assert set(json.loads(text)) == {"title", "summary", "text"}
        assert json.loads(text)["title"].startswith("rlhf-canary: regression")


def test_render_options(regression: api.CompareResult, tmp_path: Path) -> None:
    assert api.render(regression).startswith(api.render(regression, "markdown")[:40])
    assert "\x1b[" in api.render(regression, "terminal", colour=True)
    assert "\x1b[" not in api.render(regression, "terminal")
    mine = tmp_path / "templates"
    mine.mkdir()
    (mine / "compare.md.j2").write_text("ours: {{ v.title }}\n", encoding="utf-8")
    assert api.render(regression, "markdown", templates=mine) == "ours: ❌ rlhf-canary **regression** — `sft-smoke`\n"
    with pytest.raises(UsageError, match="terminal format uses no template"):
        api.render(regression, "terminal", templates=mine)
    with pytest.raises(UsageError, match="colour is for the terminal format"):
        api.render(regression, "comment", colour=True)
    with pytest.raises(UsageError, match="not a report format"):
        api.render(regression, "html")  # type: ignore[arg-type]
    (mine / "comment.j2").write_text("x", encoding="utf-8")
    with pytest.raises(TemplateError, match="replaces no template"):
        api.render(regression, "comment", templates=mine)


# --- profiles --------------------------------------------------------------------------------------------------


def profiled(seed: int, mm_ms: float, *, step_time_s: float = 0.1) -> Metrics:
    """A run whose profiler window (steps 30-34) spent `mm_ms` in aten::mm."""
    ops = [
        ProfiledOp(name="aten::mm", count=500, cpu_self_time_ms=20.0, device_self_time_ms=mm_ms),
        ProfiledOp(name="aten::add", count=500, cpu_self_time_ms=5.0, device_self_time_ms=40.0),
    ]
    profile = ProfilerSummary(trace_path="trace.json", start_step=30, end_step=34, cpu_time_total_ms=25.0,
                              device_time_total_ms=mm_ms + 40.0, top_ops=ops)  # fmt: skip
    return sample(seed, step_time_s, profiler=profile)


def test_diff_profiles_is_the_comparison_op_diff(tmp_path: Path) -> None:
    before, after = profiled(1, 200.0), profiled(4, 325.0, step_time_s=0.13)
    changes = api.diff_profiles(before, after)
    assert [(c.name, c.device) for c in changes] == [("aten::mm", True)]  # aten::add did not move
    assert changes[0].delta_ms == pytest.approx(25.0)  # 125 ms over 5 profiled steps
    assert changes[0].baseline_ms == pytest.approx(40.0)
    assert changes[0].current_ms == pytest.approx(65.0)
    base_file, head_file = written(tmp_path / "b.json", before), written(tmp_path / "h.json", after)
    assert api.diff_profiles(base_file, str(head_file)) == changes
    assert api.diff_profiles(api.load_run(base_file), head_file) == changes
    assert api.diff_profiles(after, before)[0].delta_ms == pytest.approx(-25.0)
    assert api.diff_profiles(before, after, top=0) == []
    assert api.compare(head_file, base_file).op_changes == changes


def test_diff_profiles_needs_two_profiled_runs(tmp_path: Path) -> None:
    plain = written(tmp_path / "plain.json", make_metrics())
    with pytest.raises(UsageError, match="has no profiler summary") as none:
        api.diff_profiles(profiled(1, 200.0), plain)
    assert none.value.message.startswith(f"after: {plain}")
    assert "profiler.enabled: true" in none.value.fix
    with pytest.raises(UsageError, match="keeps no profiler window"):
        api.diff_profiles(LEGACY, profiled(1, 200.0))


# --- running ---------------------------------------------------------------------------------------------------


def test_run_refuses_overrides_of_a_loaded_config(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="loaded already"):
        api.run(api.load_config(TINY_SFT), output_dir=tmp_path, overrides=["max_steps=4"])
    assert not any(tmp_path.iterdir())


def test_run_without_the_train_extra_names_it(tmp_path: Path) -> None:
    code = (
        "import importlib.abc, sys\n"
        "class Absent(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.partition('.')[0] in ('torch', 'trl'):\n"
        "            raise ModuleNotFoundError(name, name=name)\n"
        "sys.meta_path.insert(0, Absent())\n"
        "from canary_action import api\n"
        "from canary_action.errors import MissingExtraError\n"
        "try:\n"
        "    api.run(sys.argv[1], output_dir=sys.argv[2])\n"
        "except MissingExtraError as e:\n"
        "    print(e.render())\n"
    )
    out = tmp_path / "runs"
    done = subprocess.run([sys.executable, "-c", code, str(TINY_SFT), str(out)], capture_output=True, text=True,
                          check=False, cwd=ROOT, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "`api.run()` trains, and the training stack (the [train] extra) is not installed: no torch, trl" in (
        done.stdout
    )
    assert "pip install 'rlhf-canary[train]'" in done.stdout
    assert not out.exists()  # refused before anything was written


@pytest.mark.training
def test_run_trains_and_returns_what_it_wrote(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = {**api.load_config(TINY_SFT).config.model_dump(mode="json"), "name": "api-sft"}
    outcome = api.run(config, output_dir=tmp_path / "runs", overrides=["max_steps=4"])
    assert outcome.run_dir.parent == tmp_path / "runs"
    assert outcome.metrics_path == outcome.run_dir / "metrics.json"
    assert outcome.metrics == api.load_metrics(outcome.metrics_path)
    assert outcome.metrics.status.state == "completed"
    assert outcome.metrics.run.config_name == "api-sft"
    assert outcome.metrics.summary is not None
    assert outcome.metrics.summary.num_steps == 4
    assert "note: --set max_steps=4 overrides" in capsys.readouterr().err  # the loader's notices, as canary run
    with pytest.raises(dataclasses.FrozenInstanceError):
        outcome.run_dir = tmp_path  # type: ignore[misc]


@pytest.mark.training
def test_a_crashed_run_raises_after_writing_what_it_measured(tmp_path: Path) -> None:
    loaded = api.load_config(TINY_SFT, overrides=["max_steps=4", "fault_injection.crash_at_step=2"])
    with pytest.raises(TrainingError) as crashed:
        api.run(loaded, output_dir=tmp_path)
    path = crashed.value.metrics_path
    assert path is not None
    assert path.parent.parent == tmp_path
    metrics = api.load_metrics(path)
    assert metrics.status.state == "failed"
    assert metrics.summary is not None
    assert metrics.summary.num_steps >= 1
