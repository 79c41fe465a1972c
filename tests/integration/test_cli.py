"""The `canary` command as users call it: a subprocess, its exit code, its message."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import click
import pytest

from canary_action.cli import cli
from canary_action.metrics.io import read_metrics
from canary_action.train.precheck import has_value_model_ppo
from tests.factories import NO_HELDOUT

ROOT = Path(__file__).parents[2]
BAD = ROOT / "tests" / "fixtures" / "configs" / "bad"
LEGACY = ROOT / "tests" / "fixtures" / "configs" / "legacy"
LEGACY_BASELINE = ROOT / "tests" / "fixtures" / "baselines" / "legacy_0_1.json"  # an rlhf-canary 0.1 metrics.json


def canary(*args: str | Path, cwd: Path = ROOT, heldout: bool = False) -> subprocess.CompletedProcess[str]:
    """The `canary` command; `run` and `pair` without the held-out evaluation unless `heldout`."""
    quiet = NO_HELDOUT if args and args[0] in ("run", "pair") and not heldout else ()
    command = [sys.executable, "-c", "from canary_action.cli import main; main()", *map(str, args), *quiet]
    return subprocess.run(command, capture_output=True, text=True, cwd=cwd, timeout=600, check=False)


# Each bad file gives exit 2 and one message naming what is wrong.
BAD_CASES = {
    "typo.yaml": "did you mean `learning_rate`",
    "wrong_type.yaml": "max_steps",
    "missing_reward.yaml": "needs a reward",
    "unknown_builtin.yaml": "unknown builtin model",
    "unknown_training_type.yaml": "is not a training type",
    "yaml_syntax.yaml": "not valid YAML",
    "not_a_mapping.yaml": "mapping",
    "several_errors.yaml": "3 problems",
    "bad_threshold_key.yaml": "thresholds.",
    "duplicate_key.yaml": "duplicate",
    "empty.yaml": "empty",
    "quantize_4bit_on_cpu.yaml": "load_in_4bit needs a CUDA GPU",
    "gpu_fault_on_cpu.yaml": "fault_injection.gpu_matmuls_per_step plants work only a GPU does",
    "deepspeed_without_gpu.yaml": "distributed.strategy deepspeed",
}


@pytest.mark.parametrize(("name", "expected"), BAD_CASES.items())
def test_bad_config_exits_2_with_a_clear_message(name: str, expected: str, tmp_path: Path) -> None:
    result = canary("run", BAD / name, "-o", tmp_path)
    assert result.returncode == 2, result.stderr
    assert expected in result.stderr
    assert "Traceback" not in result.stderr
    assert "fix:" in result.stderr


def test_every_bad_fixture_is_covered() -> None:
    from tests.integration.test_bad_input import HOSTILE_CONFIGS  # those run under a time and memory limit

    assert {p.name for p in BAD.glob("*.yaml")} == set(BAD_CASES) | set(HOSTILE_CONFIGS)


def test_refused_at_preflight_still_writes_metrics_with_status_failed(tmp_path: Path) -> None:
    canary("run", BAD / "quantize_4bit_on_cpu.yaml", "-o", tmp_path)
    [path] = tmp_path.glob("*/metrics.json")
    status = read_metrics(path).status
    assert (status.state, status.stage, status.exception_type) == ("failed", "preflight", "ConfigError")


def test_ppo_on_a_trl_without_it_names_the_alternatives(tmp_path: Path) -> None:
    pytest.importorskip("trl")
    try:
        import trl.experimental.ppo  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("this TRL still ships PPO: tests/integration/test_ppo.py covers it")
    result = canary("run", ROOT / "configs" / "tiny" / "ppo.yaml", "-o", tmp_path)
    assert result.returncode == 2
    assert "grpo or rloo" in result.stderr
    assert "trl<=1.12" in result.stderr


def test_crashed_run_exits_3_and_keeps_its_measurements(tmp_path: Path) -> None:
    config = ROOT / "configs" / "tiny" / "sft.yaml"
    result = canary("run", config, "-o", tmp_path, "--set", "max_steps=6", "--set", "fault_injection.crash_at_step=3")
    assert result.returncode == 3
    assert "PlantedCrashError during train" in result.stderr
    [path] = tmp_path.glob("*/metrics.json")
    assert read_metrics(path).series["step"] == [1.0, 2.0]


@pytest.mark.parametrize("name", ["dpo", "sft"])
def test_legacy_flat_config_runs_unchanged(name: str, tmp_path: Path) -> None:
    result = canary("run", LEGACY / f"{name}.yaml", "-o", tmp_path)
    assert result.returncode == 0, result.stderr
    assert "ignored `" in result.stderr  # PPO keys in a DPO/SFT file: said aloud, not an error
    [path] = tmp_path.glob("*/metrics.json")
    metrics = read_metrics(path)
    assert metrics.status.state == "completed"
    assert metrics.config["training_type"] == name


def test_run_prints_the_summary_users_know(tmp_path: Path) -> None:
    result = canary("run", ROOT / "configs" / "tiny" / "sft.yaml", "-o", tmp_path, "--set", "max_steps=6", heldout=True)
    assert result.returncode == 0, result.stderr
    for phrase in ("completed", "duration", "step time", "tokens/s", "non-finite", "metrics.json"):
        assert phrase in result.stdout
    assert "step 6/6" in result.stderr  # the progress line
    # Issue 15 item 13: what is loading before step 1, a line a stage; the time left on each progress line.
    stages = [line for line in result.stderr.splitlines() if line.startswith("[tiny-sft] ") and "step " not in line]
    assert stages == [
        "[tiny-sft] loading torch, transformers and trl",
        "[tiny-sft] building the sft trainer",
        "[tiny-sft]   loading the model builtin:tiny-llama",
        "[tiny-sft]   loading the data builtin:sft-messages (256 examples)",
        "[tiny-sft] training 6 steps",
        "[tiny-sft] evaluating the trained model on held-out examples",
    ]
    assert re.search(r"step 1/6 \|.*\| ETA (<1|\d+) s$", result.stderr, re.M)
    [run_dir] = tmp_path.iterdir()
    assert sorted(p.name for p in run_dir.iterdir()) == ["metrics.json", "steps.jsonl"]  # no empty trainer/
    # Issue 26 item 3: the host memory it prints is the figure host_memory judges, whatever else it adds
    summary = read_metrics(run_dir / "metrics.json").summary
    assert summary is not None
    assert summary.host_peak_rss_mib is not None
    assert f"host RSS peak   {summary.host_peak_rss_mib:,.0f} MiB (high-water mark" in result.stdout
    # Issue 32: the held-out figure at each evaluated step, from a fresh process; nothing of it left behind.
    heldout = read_metrics(run_dir / "metrics.json").heldout
    assert heldout is not None
    assert (heldout.status, heldout.metric, heldout.evaluated_in) == ("evaluated", "next_token", "fresh_process")
    assert [p.step for p in heldout.points] == [0, 6]  # no point halfway in a run under 100 steps
    held_out = r"^  held-out        loss [\d.]+ → [\d.]+ nats/token at steps 0, 6 \(lower is better; 64 examples"
    assert re.search(held_out, result.stdout, re.M)
    learned = heldout.learning()
    assert learned is not None
    assert f"  learned         {learned[0]:+.3g} nats/token ({learned[0] / learned[1]:.0f}× its standard error)" in (
        result.stdout
    )


def test_env_shows_the_threads_a_run_records(tmp_path: Path) -> None:
    """Issue 26 item 3: `canary env` said torch_threads 2 (torch's default) where every CPU run records 1."""
    result = canary("run", ROOT / "configs" / "tiny" / "sft.yaml", "-o", tmp_path, "--set", "max_steps=2")
    assert result.returncode == 0, result.stderr
    [metrics] = tmp_path.glob("*/metrics.json")
    recorded = read_metrics(metrics).env.torch_threads
    shown = json.loads(canary("env", "--json").stdout)["torch_threads"]
    assert shown == recorded == 1


def test_set_mistakes_are_the_options_not_the_files(tmp_path: Path) -> None:
    # Issue 15 item 11: "dpo.yaml: unknown key `max_stepz`" for a typo made on the command line.
    config = ROOT / "configs" / "tiny" / "dpo.yaml"
    result = canary("run", config, "-o", tmp_path, "--set", "max_stepz=3", "--set", "profiler.enabeld=true")
    assert result.returncode == 2
    assert f"invalid canary config: --set options over {config}: 2 problems" in result.stderr
    assert "unknown key `max_stepz` — did you mean `max_steps`? (from --set max_stepz=3)" in result.stderr
    assert "did you mean `profiler.enabled`? (from --set profiler.enabeld=true)" in result.stderr
    assert "fix: correct the --set KEY=VALUE options named above" in result.stderr
    assert not any(tmp_path.iterdir())


def test_a_profiler_window_past_max_steps_is_refused_before_anything_runs(tmp_path: Path) -> None:
    result = canary("run", ROOT / "configs" / "tiny" / "sft.yaml", "-o", tmp_path, "--set", "profiler.enabled=true")
    assert result.returncode == 2
    assert "the profiler window (profiler.start_step 50, profiler.num_steps 20: steps 50-69) ends past max_steps" in (
        result.stderr
    )
    assert "Set profiler.start_step to at most 11, raise max_steps to 69" in result.stderr
    assert not any(tmp_path.iterdir())


def test_a_run_that_stops_before_its_profiler_window_says_so(tmp_path: Path) -> None:
    # Issue 15 item 12: the window was never reached, and nothing said so.
    window = ("profiler.enabled=true", "profiler.start_step=4", "profiler.num_steps=2")
    sets = [arg for value in ("max_steps=6", *window, "fault_injection.nan_loss_at_step=2") for arg in ("--set", value)]
    result = canary("run", ROOT / "configs" / "tiny" / "sft.yaml", "-o", tmp_path, *sets)
    assert result.returncode == 0, result.stderr
    said = "nothing recorded: the run stopped early (non_finite) after 2 steps, before the profiler window (steps 4-5)"
    assert f"  profiler        {said}" in result.stdout
    [path] = tmp_path.glob("*/metrics.json")
    metrics = read_metrics(path)
    assert metrics.profiler is None
    assert f"profiler: {said}" in metrics.notices


def test_ctrl_c_says_what_the_run_kept_and_exits_130(tmp_path: Path) -> None:
    # Issue 15 item 13: the terminal said only "aborted".
    command = [sys.executable, "-m", "canary_action", "run", str(ROOT / "configs" / "tiny" / "sft.yaml"),
               "-o", str(tmp_path), "--set", "max_steps=2000"]  # fmt: skip
    with subprocess.Popen(command, stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=ROOT) as run:
        assert run.stderr is not None
        seen = ""
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and "step    1/2000" not in seen:
            line = run.stderr.readline()
            if not line:
                break
            seen += line
        run.send_signal(signal.SIGINT)
        _, rest = run.communicate(timeout=120)
    assert run.returncode == 130, seen + rest
    [run_dir] = tmp_path.iterdir()
    assert f"interrupted (Ctrl-C): what the run measured so far is kept in {run_dir}" in rest
    for name in ("metrics.json", "steps.jsonl", "error.log"):
        assert re.search(rf"^  {re.escape(name)} +\S", rest, re.M), rest
    status = read_metrics(run_dir / "metrics.json").status
    assert (status.state, status.reason) == ("failed", "interrupted")
    assert "Traceback" not in rest


def test_save_baseline_validates_and_refuses_a_failed_run(tmp_path: Path) -> None:
    config = ROOT / "configs" / "tiny" / "sft.yaml"
    canary("run", config, "-o", tmp_path / "ok", "--set", "max_steps=3")
    [good] = (tmp_path / "ok").glob("*/metrics.json")
    saved = canary("save-baseline", good, tmp_path / "baselines" / "main.json")
    assert saved.returncode == 0, saved.stderr
    assert read_metrics(tmp_path / "baselines" / "main.json").run == read_metrics(good).run
    # a DEST without a suffix is a folder to create: a file named `newbase` would be skipped when compare reads
    # the folder it sits in (its .json files)
    saved = canary("save-baseline", good, tmp_path / "newbase")
    assert saved.returncode == 0, saved.stderr
    assert (tmp_path / "newbase" / f"{read_metrics(good).run.run_id}.json").is_file()

    canary("run", config, "-o", tmp_path / "bad", "--set", "fault_injection.crash_at_step=2")
    [failed] = (tmp_path / "bad").glob("*/metrics.json")
    refused = canary("save-baseline", failed, tmp_path / "baselines" / "x.json")
    assert refused.returncode == 2
    assert "failed run" in refused.stderr

    corrupt = tmp_path / "corrupt.json"
    corrupt.write_text("{not json")
    assert canary("save-baseline", corrupt, tmp_path / "y.json").returncode == 2


def legacy_metrics(path: Path, **top: object) -> Path:
    """The 0.1 fixture with top-level keys changed."""
    doc = json.loads(LEGACY_BASELINE.read_text(encoding="utf-8"))
    path.write_text(json.dumps({**doc, **top}, indent=2), encoding="utf-8")
    return path


def test_save_baseline_keeps_an_rlhf_canary_0_1_file_that_compare_reads(tmp_path: Path) -> None:
    """Issue 15 item 4: 0.1's metrics.json, refused before although compare reads it, is stored in 0.1's format."""
    from tests.integration.test_compare_cli import save

    folder = tmp_path / "baselines"
    done = canary("save-baseline", LEGACY_BASELINE, f"{folder}/")
    assert done.returncode == 0, done.stderr
    target = folder / "dpo_perf_1736087400_13c800a5.json"  # named after its run_id, as a schema-1 file is
    assert done.stdout == (
        f"saved baseline {target} (rlhf-canary 0.1 format, kept unchanged, not converted: `canary compare` reads "
        "it as a 0.1 baseline, with summary-level checks only)\n"
    )
    assert json.loads(target.read_text(encoding="utf-8")) == json.loads(LEGACY_BASELINE.read_text(encoding="utf-8"))

    same_workload = {
        "model_name": "EleutherAI/pythia-70m", "dataset_name": "Anthropic/hh-rlhf", "batch_size": 2,
        "gradient_accumulation_steps": 4, "max_length": 256,
    }  # fmt: skip
    current = save(tmp_path / "cur.json", 1, config=same_workload)
    compared = canary("compare", current, folder, "--json")
    assert compared.returncode in (0, 1), compared.stderr
    [baseline] = json.loads(compared.stdout)["baselines"]
    assert (baseline["format"], baseline["run_id"]) == ("rlhf-canary-0.1", "dpo_perf_1736087400_13c800a5")

    again = canary("save-baseline", LEGACY_BASELINE, f"{folder}/")
    assert again.returncode == 2, again.stderr
    assert f"{target} exists: save-baseline never replaces a file" in again.stderr


def test_save_baseline_reads_a_0_1_file_as_compare_does(tmp_path: Path) -> None:
    broken = canary("save-baseline", LEGACY_BASELINE.with_name("legacy_bad.json"), tmp_path / "a.json")
    assert broken.returncode == 2, broken.stderr
    assert "looks like an rlhf-canary 0.1 metrics.json but does not match that format" in broken.stderr
    assert "perf.step_time" in broken.stderr

    failed = canary("save-baseline", legacy_metrics(tmp_path / "failed.json", status="failed"), tmp_path / "b.json")
    assert failed.returncode == 2, failed.stderr
    assert "is a failed run (rlhf-canary 0.1 records no cause)" in failed.stderr

    stopped = canary("save-baseline", legacy_metrics(tmp_path / "timeout.json", status="timeout"), tmp_path / "c.json")
    assert stopped.returncode == 0, stopped.stderr
    assert "(stopped early: timeout; `canary compare` leaves stopped-early runs out)" in stopped.stdout
    assert not (tmp_path / "a.json").exists()
    assert not (tmp_path / "b.json").exists()
    assert all("Traceback" not in done.stderr for done in (broken, failed, stopped))


def test_init_config_writes_a_config_that_loads(tmp_path: Path) -> None:
    out = tmp_path / "c.yaml"
    done = canary("init-config", out, "--type", "grpo", "--tier", "perf")
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"wrote {out} (grpo, perf tier, device cuda, model and data from the Hub)\n"
    assert canary("init-config", out).returncode == 2  # exists: refused without --force
    from canary_action.config.load import load_config

    assert load_config(out).config.training_type == "grpo"


@pytest.mark.parametrize("training_type", ["sft", "dpo", "grpo", "rloo", "ppo", "custom"])
def test_init_config_builtin_writes_an_offline_config_into_new_folders(training_type: str, tmp_path: Path) -> None:
    """Issue 15 item 5: `canary init-config sub/dir/canary.yaml` creates the folders (0.1 did), and --builtin
    names nothing to download, so that `canary run` on it works offline."""
    out = tmp_path / "sub" / "dir" / "canary.yaml"
    done = canary("init-config", out, "--type", training_type, "--builtin", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    if training_type == "ppo" and not has_value_model_ppo():  # TRL removed value-model PPO after 1.12
        assert done.stdout == f"wrote {out} (ppo, smoke tier, device auto, but the installed TRL has no value-model " \
                              "PPO: `canary run` refuses it)\n"  # fmt: skip
        assert "use training_type: grpo or rloo" in done.stderr
    else:
        assert done.stdout == f"wrote {out} ({training_type}, smoke tier, device auto, builtin model and data: runs " \
                              "offline)\n"  # fmt: skip
    assert "Traceback" not in done.stderr
    from canary_action.config.load import load_config

    loaded = load_config(out)
    assert loaded.notices == []
    config = loaded.config
    assert config.training_type == training_type
    named = {key: getattr(config, key, None) for key in ("model_name", "tokenizer_name", "dataset_name",
                                                         "reward_model", "value_model")}  # fmt: skip
    assert all(value is None or value.startswith("builtin:") for value in named.values()), named
    assert all(name.startswith("builtin:") for name in getattr(config, "reward_funcs", []))


def test_init_config_refuses_a_folder_for_out(tmp_path: Path) -> None:
    done = canary("init-config", tmp_path, "--force")  # a folder that exists
    assert done.returncode == 2, done.stderr
    assert f"pass a file path to OUT, e.g. {tmp_path / 'canary.yaml'}" in done.stderr
    done = canary("init-config", f"{tmp_path / 'configs'}/")
    assert done.returncode == 2, done.stderr
    assert f"OUT {tmp_path / 'configs'}/ ends in /: a folder, and init-config writes a file" in done.stderr
    assert f"canary init-config {tmp_path / 'configs' / 'canary.yaml'}" in done.stderr
    assert not (tmp_path / "configs").exists()


def test_schema_prints_json_schemas() -> None:
    metrics = json.loads(canary("schema").stdout)
    assert "schema_version" in metrics["properties"]
    result = json.loads(canary("schema", "--result").stdout)
    assert "result_schema_version" in result["properties"]
    assert result["$id"] == "urn:rlhf-canary:compare-result:v4"
    config = json.loads(canary("schema", "--config").stdout)
    assert "oneOf" in json.dumps(config) or "anyOf" in json.dumps(config)


# A Python without the training stack, as after rlhf-canary 0.1's `pip install -e ".[dev]"`: torch, transformers
# and trl refuse to import ("absent"), or torch is found but does not import (a half-installed copy: "broken").
WITHOUT_TRAINING = """
import importlib.abc, importlib.machinery, sys

class Absent(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in ("torch", "transformers", "trl"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

class Unloadable(importlib.abc.Loader):
    def create_module(self, spec):
        return None

    def exec_module(self, module):
        raise ModuleNotFoundError("No module named 'torch._C'", name="torch._C")

class Broken(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        return importlib.machinery.ModuleSpec(name, Unloadable()) if name == "torch" else None

sys.meta_path.insert(0, Absent() if sys.argv.pop(1) == "absent" else Broken())
from canary_action.cli import main
main()
"""


@pytest.mark.parametrize("how", ["absent", "broken"])
def test_run_without_the_train_extra_exits_2_naming_it(how: str, tmp_path: Path) -> None:
    """Issue 15 item 8: not a traceback ending in `No module named 'torch'`, but the extra to install."""
    out = tmp_path / "runs"
    command = [sys.executable, "-c", WITHOUT_TRAINING, how, "run", str(LEGACY / "dpo.yaml"), "-o", str(out)]
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=120, check=False)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert "`canary run` trains, and the training stack (the [train] extra) is not installed: no torch" in done.stderr
    assert "pip install 'rlhf-canary[train]'" in done.stderr
    assert "pip install -c requirements/ci-constraints.txt -e '.[train]'" in done.stderr
    if how == "absent":
        assert "no torch, transformers, trl\n" in done.stderr
        assert not out.exists()  # refused before anything was written
    else:
        assert "no torch._C\n" in done.stderr


def test_pair_without_the_train_extra_exits_2_naming_it(tmp_path: Path) -> None:
    out = tmp_path / "pairs"
    args = ["pair", "configs/tiny/dpo.yaml", "--base", str(ROOT), "--head", str(ROOT), "-o", str(out)]
    command = [sys.executable, "-c", WITHOUT_TRAINING, "absent", *args]
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=120, check=False)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert "`canary pair` trains, and the training stack (the [train] extra) is not installed" in done.stderr
    assert "pip install 'rlhf-canary[train]'" in done.stderr
    assert not out.exists()


def test_pair_refuses_json_with_a_format_before_training(tmp_path: Path) -> None:
    out = tmp_path / "pairs"
    done = canary("pair", "configs/tiny/dpo.yaml", "--base", str(ROOT), "--head", str(ROOT), "-o", str(out),
                  "--json", "--format", "markdown")  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "--json prints the result, not a report" in done.stderr
    assert not out.exists()


def test_the_training_stack_checked_is_the_train_extra() -> None:
    import tomllib

    from canary_action.cli import TRAINING_STACK

    extra = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    names = {req.split(">")[0].split("<")[0].split("=")[0].split("[")[0].strip() for req in extra["train"]}
    assert names - {"nvidia-ml-py"} == set(TRAINING_STACK)  # import names equal the distribution names here


def test_light_commands_do_not_import_torch(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "from canary_action.cli import cli\n"
        "for args in (['schema'], ['schema', '--config'], ['init-config', sys.argv[1]],\n"
        "             ['init-config', sys.argv[1] + '.builtin', '--builtin']):\n"
        "    cli.main(args, standalone_mode=False)\n"
        "import canary_action.api  # the Python API: only its run() trains\n"
        "heavy = [m for m in ('torch', 'transformers', 'trl') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    command = [sys.executable, "-c", code, str(tmp_path / "x.yaml")]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr


def test_version_and_help() -> None:
    assert "rlhf-canary" in canary("--version").stdout
    help_text = canary("--help").stdout
    for command in ("env", "run", "pair", "bisect", "compare", "report", "gh-report", "init-config", "save-baseline",
                    "schema"):  # fmt: skip
        assert command in help_text


def test_the_command_line_is_frozen() -> None:
    """Every command and flag (a public surface: workflows call them). A change here is a release note."""
    commands = {name: command for name, command in cli.commands.items() if not isinstance(command, click.Group)}
    for group in (c for c in cli.commands.values() if isinstance(c, click.Group)):
        commands |= {f"{group.name} {name}": command for name, command in group.commands.items()}
    surface = {
        name: sorted(
            opt
            for param in command.params  # secondary_opts: the off switch of a --x/--no-x flag
            for opt in ([*param.opts, *param.secondary_opts] if param.opts else [param.name or ""])
        )
        for name, command in sorted(commands.items())
    }
    assert surface == {
        # issue 27: which commit made the canary slower (docs/bisect.md)
        "bisect": sorted(["config", "--good", "--bad", "-o", "--output-dir", "--set", "--setup", "--check",
                          "--max-pairs", "--chunk-steps", "--cpus", "--threshold-tier", "--threshold-file", "--json",
                          "--format"]),
        # --format (terminal|markdown): issue 15 item 14; --templates: item 17
        "compare": sorted(["current", "baselines", "--threshold-tier", "--threshold-file", "--allow-change", "--json",
                           "--format", "-o", "--output", "--templates",
                           # issue 32: a maintainer's acknowledgment of a changed training math
                           "--accept-numerics-change"]),
        "env": ["--json"],
        # rlhf-canary 0.1's gh-report (issue 15 item 2): its flags, and --comment-mode as the action's `comment`;
        # --trusted-config: issue 25 item 2 (the current run's thresholds block is used only when trusted)
        "gh-report": sorted(["current", "baselines", "--threshold-tier", "--threshold-file", "--post-comment",
                             "--no-comment", "--update-status", "--no-status", "--comment-mode", "-o", "--output",
                             "--templates", "--trusted-config",
                             "--accept-config-change"]),  # issue 34: an incomparable PR run fails, unless accepted
        # --builtin: issue 15 item 5; --device: issue 35 (a Hub sample is for a GPU runner: cuda)
        # issue 38: the history of a config's trusted runs and its static site (docs/history.md)
        "history append": sorted(["history", "output", "--repository", "--event", "--commit", "--run-id",
                                  "--pull-request", "--pull-request-result", "--bisect-bad", "--bisect-summary",
                                  "--keep"]),
        "history build": sorted(["source", "-o", "--output", "--repository"]),
        "init-config": sorted(["out", "--type", "--tier", "--builtin", "--device", "--force"]),
        # --format (terminal|markdown): as compare's, the walk-through after issue 15
        # --confirm-minutes: issue 33 (a speed failure confirmed by a second pair)
        "pair": sorted(["config", "--base", "--head", "-o", "--output-dir", "--set", "--chunk-steps", "--seed",
                        "--cpus", "--setup", "--confirm-minutes", "--baseline", "--threshold-tier", "--threshold-file",
                        "--json", "--format", "--accept-numerics-change"]),
        # issue 36: a captured step through the model alone, under variants (docs/replay.md); --rows-to is hidden,
        # the way a --tree replay's child hands its rows back
        "replay": sorted(["run_dir", "--step", "--variant", "--matrix", "--tree", "--repeats", "-o", "--output",
                          "--json", "--format", "--rows-to"]),
        "report": sorted(["result_file", "--format", "-o", "--output", "--repo", "--pr", "--templates"]),
        "run": sorted(["config", "-o", "--output-dir", "--set"]),
        "save-baseline": sorted(["metrics", "dest"]),
        "schema": ["--config", "--result"],
    }  # fmt: skip
    assert sorted(opt for param in cli.params for opt in param.opts) == sorted(["--version", "-v", "--verbose"])


TEAM_FACTORY = """
from canary_action.train.builtin.example_factory import build_trainer as plain


def build_trainer(context):
    return plain(context)
"""


@pytest.mark.parametrize("processes", [1, 2])
def test_the_canary_command_imports_a_team_factory_from_the_folder_it_runs_in(processes: int, tmp_path: Path) -> None:
    """The installed `canary` script (whose own folder, not the working directory, heads its import path) finds
    the team's package beside the config, in one process and in each launched rank, as `canary pair` finds it in
    each side's tree: the folder is appended after the installed packages."""
    (tmp_path / "team_pipeline").mkdir()
    (tmp_path / "team_pipeline" / "__init__.py").write_text("", encoding="utf-8")
    (tmp_path / "team_pipeline" / "factory.py").write_text(TEAM_FACTORY, encoding="utf-8")
    custom = (ROOT / "configs" / "tiny" / "custom.yaml").read_text(encoding="utf-8")
    config = custom.replace("canary_action.train.builtin.example_factory", "team_pipeline.factory")
    (tmp_path / "canary.yaml").write_text(config + f"num_processes: {processes}\n", encoding="utf-8")
    script = Path(sys.executable).parent / "canary"
    done = subprocess.run(
        [str(script), "run", "canary.yaml", "-o", "runs", "--set", "max_steps=3"],
        cwd=tmp_path, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    (metrics_path,) = (tmp_path / "runs").glob("*/metrics.json")
    metrics = read_metrics(metrics_path)
    assert metrics.status.state == "completed"
    assert metrics.config["trainer_factory"] == "team_pipeline.factory:build_trainer"
