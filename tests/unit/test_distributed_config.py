"""Multi-process configs: num_processes, the distributed block, the planted straggler, and what the launcher
is given (its command, its config file, each strategy's Trainer arguments). No process is started here."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
import yaml

from canary_action.config import config_hash, load_config, parse_config
from canary_action.errors import ConfigError
from canary_action.train import distributed
from canary_action.train.launch.rank_worker import LaunchSpec
from canary_action.train.launch.ranks import launcher_command, write_launch_files

ROOT = Path(__file__).parents[2]
BAD = ROOT / "tests" / "fixtures" / "configs" / "bad"
TINY = {
    "name": "t",
    "training_type": "sft",
    "model_name": "builtin:tiny-llama",
    "dataset_name": "builtin:sft",
}


def error_of(data: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as caught:
        parse_config(data, source="c.yaml")
    return caught.value.render()


def test_one_process_without_a_distributed_block_is_the_default() -> None:
    config = parse_config(TINY, source="c.yaml").config
    assert config.num_processes == 1
    assert config.distributed is None
    assert config.fault_injection is None


def test_ddp_with_one_process_is_a_notice_not_an_error() -> None:
    loaded = parse_config({**TINY, "distributed": {"strategy": "ddp"}}, source="c.yaml")
    assert any("distributed is ignored with num_processes 1" in notice for notice in loaded.notices)


@pytest.mark.parametrize("strategy", ["fsdp", "deepspeed"])
def test_a_sharded_strategy_with_one_process_is_an_error(strategy: str) -> None:
    text = error_of({**TINY, "distributed": {"strategy": strategy}})
    assert f"distributed.strategy {strategy} needs num_processes >= 2" in text


@pytest.mark.parametrize(
    ("distributed_block", "phrase"),
    [
        ({"strategy": "fsdp"}, "distributed.strategy fsdp runs on GPUs only"),
        ({"strategy": "deepspeed"}, "distributed.strategy deepspeed runs on GPUs only"),
        ({"backend": "nccl"}, "distributed.backend nccl needs GPUs"),
    ],
)
def test_what_cannot_run_on_a_cpu_config_is_refused_at_load(distributed_block: dict[str, Any], phrase: str) -> None:
    text = error_of({**TINY, "device": "cpu", "num_processes": 2, "distributed": distributed_block})
    assert phrase in text


def test_a_setting_of_another_strategy_is_an_error_naming_it() -> None:
    text = error_of({**TINY, "num_processes": 2, "distributed": {"strategy": "ddp", "zero_stage": 3}})
    assert "zero_stage does not apply to strategy ddp" in text


def test_closed_block_with_did_you_mean_and_bounds() -> None:
    typo = {**TINY, "num_processes": 2, "distributed": {"bakend": "gloo"}}
    assert "did you mean `distributed.backend`" in error_of(typo)
    assert "num_processes: must be >= 1, got 0" in error_of({**TINY, "num_processes": 0})
    deepspeed = {"strategy": "deepspeed", "zero_stage": 4}
    assert "zero_stage" in error_of({**TINY, "num_processes": 2, "distributed": deepspeed})
    assert "'mpi'" in error_of({**TINY, "num_processes": 2, "distributed": {"backend": "mpi"}})


def test_a_planted_straggler_needs_that_rank() -> None:
    assert "set num_processes >= 2" in error_of({**TINY, "fault_injection": {"slow_rank": 0}})
    text = error_of({**TINY, "num_processes": 2, "fault_injection": {"slow_rank": 2}})
    assert "fault_injection.slow_rank 2 does not exist: ranks are 0..1" in text


def test_the_resolved_config_round_trips_into_metrics_and_back() -> None:
    """metrics.json's `config` (every key, every default) loads again as the same config: the launcher hands
    it to each rank this way, and a user may rerun a baseline's config."""
    data = {
        **TINY,
        "num_processes": 2,
        "distributed": {"backend": "gloo", "bucket_cap_mb": 10},
        "fault_injection": {"slow_rank": 1, "slow_rank_sleep_s": 0.1},
    }
    config = parse_config(data, source="c.yaml").config
    dumped = config.model_dump(mode="json")
    assert dumped["num_processes"] == 2
    assert dumped["distributed"]["strategy"] == "ddp"
    assert dumped["distributed"]["bucket_cap_mb"] == 10
    assert dumped["fault_injection"]["slow_rank"] == 1
    assert dumped["fault_injection"]["slow_rank_sleep_s"] == 0.1
    again = parse_config(dumped, source="metrics.json").config
    assert again == config
    assert config_hash(again) == config_hash(config)


def test_the_ready_ddp_config_runs_two_processes() -> None:
    config = load_config(ROOT / "configs" / "tiny" / "ddp.yaml").config
    assert config.num_processes == 2
    assert config.distributed is not None
    assert config.distributed.strategy == "ddp"


def test_the_bad_fixture_loads_and_is_refused_before_launching() -> None:
    config = load_config(BAD / "deepspeed_without_gpu.yaml").config
    with pytest.raises(ConfigError, match=r"distributed\.strategy deepspeed"):
        distributed.check_launch(config)


def test_deepspeed_without_its_package_is_refused_with_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    # As on a GPU runner: GPUs visible, no deepspeed (the image does not ship it).
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    real = distributed.importlib.util.find_spec
    hidden = lambda name, *rest: None if name == "deepspeed" else real(name, *rest)  # noqa: E731
    monkeypatch.setattr(distributed.importlib.util, "find_spec", hidden)
    config = load_config(BAD / "deepspeed_without_gpu.yaml").config
    with pytest.raises(ConfigError, match="deepspeed package is not installed") as caught:
        distributed.check_launch(config)
    assert "pip install deepspeed" in caught.value.fix


def test_more_processes_than_gpus_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    config = parse_config({**TINY, "num_processes": 2}, source="c.yaml").config
    with pytest.raises(ConfigError, match="num_processes 2 but this process sees 1 GPU"):
        distributed.check_launch(config)


def test_ddp_on_the_cpu_launches_with_gloo() -> None:
    config = parse_config({**TINY, "device": "cpu", "num_processes": 2}, source="c.yaml").config
    on_cuda, _ = distributed.check_launch(config)
    assert not on_cuda
    kwargs = distributed.trainer_kwargs(config, on_cuda)
    assert kwargs == {"ddp_backend": "gloo", "ddp_find_unused_parameters": False, "ddp_bucket_cap_mb": None}
    assert distributed.backend(config, on_cuda=True) == "nccl"


def test_fsdp_and_deepspeed_reach_the_trainer_arguments() -> None:
    fsdp = parse_config(
        {**TINY, "num_processes": 2, "distributed": {"strategy": "fsdp", "fsdp_sharding_strategy": "SHARD_GRAD_OP"}},
        source="c.yaml",
    ).config
    kwargs = distributed.trainer_kwargs(fsdp, on_cuda=True)
    assert kwargs["ddp_backend"] == "nccl"
    assert kwargs["fsdp_config"]["auto_wrap_policy"] == "TRANSFORMER_BASED_WRAP"
    assert kwargs["fsdp_config"]["reshard_after_forward"] is False  # SHARD_GRAD_OP: FSDP2 keeps params gathered
    offloaded = {"strategy": "deepspeed", "zero_stage": 3, "offload_optimizer": True}
    deepspeed = parse_config({**TINY, "num_processes": 2, "distributed": offloaded}, source="c.yaml").config
    config = distributed.trainer_kwargs(deepspeed, on_cuda=True)["deepspeed"]
    assert config["zero_optimization"]["stage"] == 3
    assert config["zero_optimization"]["offload_optimizer"]["device"] == "cpu"
    assert config["train_micro_batch_size_per_gpu"] == "auto"  # the Trainer fills it: one source of truth


def test_the_launch_is_accelerate_with_our_own_config_file(tmp_path: Path) -> None:
    loaded = parse_config({**TINY, "num_processes": 2}, source="c.yaml")
    spec_path, accelerate_config = write_launch_files(loaded, tmp_path, on_cuda=False)
    command = launcher_command(2, 1, spec_path, accelerate_config)

    assert command[1:3] == ["-m", "accelerate.commands.launch"]
    assert command[command.index("--num_processes") + 1] == "2"
    assert command[command.index("--num_cpu_threads_per_process") + 1] == "1"
    assert command[command.index("--main_process_port") + 1] == "0"  # a free port, chosen by accelerate
    assert command[command.index("--config_file") + 1] == str(accelerate_config)  # never the user's default
    assert command[-4:] == ["--module", "canary_action.train.launch.rank_worker", "--spec", str(spec_path)]
    spec = LaunchSpec.model_validate_json(spec_path.read_text())
    assert parse_config(spec.config, source="spec").config == loaded.config
    assert spec.run_dir.is_absolute()

    from accelerate.commands.config.config_args import load_config_from_file

    cluster = load_config_from_file(str(accelerate_config))
    assert cluster.distributed_type.value == "MULTI_GPU"
    assert cluster.num_processes == 2
    assert yaml.safe_load(accelerate_config.read_text())["use_cpu"] is True
