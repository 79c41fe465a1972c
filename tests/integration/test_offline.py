"""`canary run` without the Hugging Face Hub, as a newcomer meets it: a config that names the Hub fails in
seconds with exit 2 and the ways to run offline, and config mistakes that need no torch to find are refused
before torch is imported.

The Hub is made unreachable the same way on every machine, networked or not: HF_ENDPOINT points at a local
port nothing listens on (connecting is refused at once), and HF_HOME at an empty cache.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).parents[2]
#: Before this check, an unreachable Hub cost huggingface_hub's backoff sleeps, 1 + 2 + 4 + 8 + 8 = 23 s per
#: file (two files at least: 56 s measured, 100 s with a dataset), after 10-80 s of imports. A refusal that
#: comes before both takes about a second; the bound leaves a CI machine busy with other jobs ten times that,
#: and stays below a single file's sleeps, which no machine load can shorten.
FAST_S = 20.0
LOADING = "loading torch, transformers and trl"  # printed just before the heavy imports


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def run_offline(
    tmp_path: Path, config: dict[str, object], **env: str
) -> tuple[subprocess.CompletedProcess[str], float]:
    """`canary run` of `config` with the Hub unreachable and an empty cache; (the process, its wall time)."""
    path = tmp_path / "canary.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    offline = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE")  # the test sets them, or none
    base = {k: v for k, v in os.environ.items() if k not in offline}
    base.update({
        "HF_HOME": str(tmp_path / "hf"),
        "HF_ENDPOINT": f"http://127.0.0.1:{closed_port()}",
        "HF_HUB_ETAG_TIMEOUT": "5",  # bounds every wait, should connecting hang somewhere
        "HF_HUB_DOWNLOAD_TIMEOUT": "5",
        **env,
    })  # fmt: skip
    command = [sys.executable, "-m", "canary_action", "run", str(path), "-o", str(tmp_path / "runs")]
    started = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True, cwd=tmp_path, env=base, timeout=600, check=False)
    return done, time.monotonic() - started


def tiny(**keys: object) -> dict[str, object]:
    return {
        "name": "offline", "training_type": "sft", "model_name": "builtin:tiny-llama", "dataset_name": "builtin:sft",
        "dataset_size": 32, "max_length": 64, "max_prompt_length": 16, "max_steps": 3, "batch_size": 2,
        "use_peft": False, **keys,
    }  # fmt: skip


def assert_refused_before_imports(done: subprocess.CompletedProcess[str], wall_s: float, tmp_path: Path) -> None:
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert LOADING not in done.stderr  # refused before torch was imported...
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())  # ...and before any write
    assert wall_s < FAST_S, f"{wall_s:.1f} s"


def test_a_hub_model_the_cache_lacks_fails_fast_naming_the_offline_ways(tmp_path: Path) -> None:
    done, wall_s = run_offline(tmp_path, tiny(model_name="EleutherAI/pythia-70m"))
    assert_refused_before_imports(done, wall_s, tmp_path)
    assert "the Hugging Face Hub cannot be reached" in done.stderr
    assert "model_name EleutherAI/pythia-70m" in done.stderr
    assert "builtin:pythia-70m" in done.stderr
    assert "hf download EleutherAI/pythia-70m" in done.stderr
    assert "HF_HUB_OFFLINE=1" in done.stderr
    assert "Retrying" not in done.stderr


def test_a_hub_dataset_the_cache_lacks_fails_fast_naming_the_builtin_data(tmp_path: Path) -> None:
    done, wall_s = run_offline(tmp_path, tiny(training_type="dpo", dataset_name="Anthropic/hh-rlhf"))
    assert_refused_before_imports(done, wall_s, tmp_path)
    assert "dataset_name Anthropic/hh-rlhf" in done.stderr
    assert "builtin:preference" in done.stderr
    assert "HF_HUB_OFFLINE=1" in done.stderr


def test_offline_mode_with_an_empty_cache_is_refused_without_asking_the_hub(tmp_path: Path) -> None:
    done, wall_s = run_offline(tmp_path, tiny(model_name="EleutherAI/pythia-70m"), HF_HUB_OFFLINE="1")
    assert_refused_before_imports(done, wall_s, tmp_path)
    assert "offline mode (HF_HUB_OFFLINE) is on" in done.stderr
    assert "; asking the Hub (" not in done.stderr  # the line announcing a probe


def test_a_trainer_factory_module_that_does_not_exist_is_refused_before_the_imports(tmp_path: Path) -> None:
    config = tiny(training_type="custom", trainer_factory="team_pipeline.canary:build_trainer")
    done, wall_s = run_offline(tmp_path, config)
    assert_refused_before_imports(done, wall_s, tmp_path)
    assert "trainer_factory: cannot import module 'team_pipeline.canary'" in done.stderr


def test_a_reward_module_that_does_not_exist_is_refused_before_the_imports(tmp_path: Path) -> None:
    config = tiny(training_type="grpo", dataset_name="builtin:prompts", reward_funcs=["team_rewards:helpful"],
                  max_new_tokens=8, batch_size=4)  # fmt: skip
    done, wall_s = run_offline(tmp_path, config)
    assert_refused_before_imports(done, wall_s, tmp_path)
    assert "reward_funcs: cannot import module 'team_rewards'" in done.stderr


def test_a_missing_local_dataset_file_is_refused_before_the_imports(tmp_path: Path) -> None:
    done, wall_s = run_offline(tmp_path, tiny(dataset_name="data/prefs.jsonl"))
    assert_refused_before_imports(done, wall_s, tmp_path)
    assert "dataset_name data/prefs.jsonl" in done.stderr


def test_ppo_on_a_trl_without_it_is_refused_before_the_imports(tmp_path: Path) -> None:
    from canary_action.train.precheck import has_value_model_ppo

    if has_value_model_ppo():
        pytest.skip("this TRL still ships PPO: tests/integration/test_ppo.py covers it")
    config = tiny(training_type="ppo", model_name="builtin:tiny-gpt-neox", dataset_name="builtin:prompts")
    done, wall_s = run_offline(tmp_path, config)
    assert_refused_before_imports(done, wall_s, tmp_path)
    assert "grpo or rloo" in done.stderr


@pytest.mark.training
def test_a_cached_hub_model_trains_offline_when_the_hub_cannot_be_reached(tmp_path: Path) -> None:
    """The cache has it: the run goes on, from the cache, at once (not after a 23 s retry per file), and says so."""
    from canary_action.metrics.io import read_metrics
    from canary_action.train.builtin import models, tokenizer

    snapshot = tmp_path / "hf" / "hub" / "models--team--tiny-llama" / "snapshots" / ("0" * 40)
    built = models.materialize("tiny-llama", seed=0, directory=tmp_path / "built", task="causal-lm")
    snapshot.mkdir(parents=True)
    for file in built.iterdir():
        (snapshot / file.name).write_bytes(file.read_bytes())
    tokenizer.build_tokenizer().save_pretrained(snapshot)
    (snapshot.parents[1] / "refs").mkdir()
    (snapshot.parents[1] / "refs" / "main").write_text("0" * 40)

    done, _ = run_offline(tmp_path, tiny(model_name="team/tiny-llama"))
    assert done.returncode == 0, done.stderr
    assert "Retrying" not in done.stderr
    [path] = (tmp_path / "runs").glob("*/metrics.json")
    metrics = read_metrics(path)
    assert metrics.status.state == "completed"
    [notice] = [n for n in metrics.notices if "cannot be reached" in n]
    assert "team/tiny-llama" in notice
    assert "HF_HUB_OFFLINE=1" in notice
    # The held-out evaluator, a process of its own, loads the same model from the same cache, offline too.
    assert metrics.heldout is not None
    assert metrics.heldout.status == "evaluated", metrics.heldout.message


def test_library_log_lines_are_printed_once(tmp_path: Path) -> None:
    """huggingface_hub and datasets (and transformers under CI=true) print through their own handler and pass
    the record on to the root logger, where the CLI's handler printed it again."""
    script = (
        "import logging\n"
        "logging.basicConfig(level=logging.WARNING, format='%(levelname)s %(name)s: %(message)s')  # as the CLI\n"
        "from canary_action.train.run import quiet_libraries\n"
        "quiet_libraries()\n"
        "for name in ('huggingface_hub.utils._http', 'datasets.load', 'transformers.modeling_utils'):\n"
        "    logging.getLogger(name).warning('said by %s', name)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env={**os.environ, "CI": "true"},
        cwd=tmp_path, timeout=600, check=True,
    )  # fmt: skip
    for name in ("huggingface_hub.utils._http", "datasets.load", "transformers.modeling_utils"):
        assert done.stderr.count(f"said by {name}") == 1, done.stderr
