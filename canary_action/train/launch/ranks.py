"""A multi-process canary (num_processes > 1): launched through accelerate's launcher, merged into one
metrics.json by the process that launched it.

    canary run ──► preflight here (no CUDA context) ──► accelerate launch (torchrun) ──► N x launch/rank_worker.py
        ──► each rank: its steps file + RankRecord ──► here: merge (metrics/merge.py) ──► metrics.json

The parent picks run_id and the run directory and hands them down in a spec file, so all ranks agree. It
merges after the launcher has exited, whatever the outcome: a rank that crashed, one the launcher ended
because another crashed, one killed before it could write its record (its streamed steps survive), a
launcher that hung, or Ctrl-C. Process management (rendezvous, ports, watching and ending the workers) is
accelerate's and torchrun's; this module starts one subprocess and waits for it.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import threading
from datetime import datetime
from pathlib import Path
from typing import IO, Any, Final, TextIO

import yaml

from canary_action.config.load import LoadedConfig
from canary_action.errors import CanaryError, ConfigError, RunInterrupted, TrainingError
from canary_action.evaluate.client import Evaluator
from canary_action.metrics import schema as m
from canary_action.metrics.heldout import HeldoutEval
from canary_action.metrics.io import write_metrics
from canary_action.metrics.merge import (
    RankRecord,
    RankRun,
    base_run,
    distributed_summary,
    first_failure,
    merge_non_finite,
    merge_series,
    merge_status,
)
from canary_action.metrics.stream import KILLED, KILLED_MESSAGE, read_rows
from canary_action.metrics.summarize import steady_rows, summarize
from canary_action.train import distributed
from canary_action.train.launch import heldout
from canary_action.train.launch.environment import safe_path_environment
from canary_action.train.launch.outcome import RunOutcome
from canary_action.train.launch.rank_worker import LaunchSpec
from canary_action.train.placement import cpu_threads
from canary_action.train.ranks import record_path, steps_path
from canary_action.train.run import assemble_metrics, family_module, profiler_steps
from canary_action.train.stages import current_stage, reset_stage, stage

#: Beyond the training loop's own timeout: model loading (a first download), process start and teardown. Only
#: a hung launcher meets this limit; a slow training loop stops itself at timeout_minutes, measured.
LAUNCH_MARGIN_S: Final = 30 * 60
_STOP_GRACE_S: Final = 60  # torchrun gives its workers 30 s between SIGTERM and SIGKILL


class LaunchTimeoutError(RuntimeError):
    """The launcher outlived timeout_minutes plus the margin: a hang (a collective waiting for a dead peer)."""


def launch_canary(
    loaded: LoadedConfig, run_id: str, run_dir: Path, started: datetime, evaluator: Evaluator | None = None
) -> RunOutcome:
    """Launch the ranks and merge them; `evaluator` (launch/heldout.py) scores what rank 0 snapshotted."""
    config = loaded.config
    notices, warnings = list(loaded.notices), []
    threads = cpu_threads(config, on_cuda=config.device == "cuda")  # until the launch check knows
    reset_stage()
    try:
        with stage("preflight"):
            family_module(config.training_type).preflight(config)
            on_cuda, launch_warnings = distributed.check_launch(config)
            warnings += launch_warnings
            threads = cpu_threads(config, on_cuda=on_cuda)
    except CanaryError as error:
        if evaluator is not None:
            evaluator.cancel()
        status = m.Status(
            state="failed", reason="error", stage=current_stage(), exception_type=type(error).__name__,
            message=error.message[:2000],
        )  # fmt: skip
        _write(
            loaded=loaded, run_id=run_id, run_dir=run_dir, started=started, runs=[], status=status,
            notices=notices, warnings=warnings, threads=threads,
        )  # fmt: skip
        raise
    killed = m.Status(state="failed", reason=KILLED, stage="train", message=KILLED_MESSAGE)
    _write(
        loaded=loaded, run_id=run_id, run_dir=run_dir, started=started, runs=[], status=killed,
        notices=notices, warnings=warnings, threads=threads,
    )  # fmt: skip  # what a SIGKILL of this process leaves: rebuilt from the ranks' streams (metrics/stream.py)
    spec_path, accelerate_config = write_launch_files(loaded, run_dir, on_cuda)
    command = launcher_command(config.num_processes, threads, spec_path, accelerate_config)
    print(f"[{config.name}] launching {config.num_processes} processes: {' '.join(command)}", file=sys.stderr)
    interrupted: BaseException | None = None
    try:
        exit_code = _run_launcher(command, config.timeout_minutes * 60 + LAUNCH_MARGIN_S)
    except (KeyboardInterrupt, LaunchTimeoutError) as error:
        interrupted, exit_code = error, -1
    runs = collect_ranks(run_dir / "ranks", config.num_processes)
    status, merge_warnings = merge_status(runs, config.num_processes, exit_code)
    if interrupted is not None:
        status = m.Status(
            state="failed",
            reason="interrupted" if isinstance(interrupted, KeyboardInterrupt) else "error",
            step=status.step,
            stage="train",
            exception_type=type(interrupted).__name__,
            message=str(interrupted)[:2000] or "interrupted",
        )
    evaluation = heldout.not_evaluated(config)
    if evaluator is not None and interrupted is None:
        evaluation = heldout.finish(evaluator, [("run", run_dir, status)], config.name)["run"]
    elif evaluator is not None:
        evaluator.cancel()
    metrics = _write(
        loaded=loaded, run_id=run_id, run_dir=run_dir, started=started, runs=runs, status=status,
        notices=notices, warnings=warnings + merge_warnings, threads=threads, heldout=evaluation,
    )  # fmt: skip
    if isinstance(interrupted, KeyboardInterrupt):
        raise RunInterrupted(run_dir, interrupted) from interrupted
    if status.state == "failed":
        raise _failure(runs, status, run_dir, interrupted)
    return RunOutcome(metrics, run_dir / "metrics.json")


def write_launch_files(loaded: LoadedConfig, run_dir: Path, on_cuda: bool) -> tuple[Path, Path]:
    """The spec every rank reads, and an accelerate config file of our own.

    The config file makes the launch hermetic: without one, accelerate reads the user's default config
    (~/.cache/huggingface/accelerate/default_config.yaml) and fills unset options from it.
    """
    directory = run_dir / "launch"
    directory.mkdir(parents=True, exist_ok=True)
    spec = LaunchSpec(run_dir=run_dir.resolve(), config=loaded.config.model_dump(mode="json"))
    spec_path = directory / "spec.json"
    spec_path.write_text(spec.model_dump_json(indent=2), encoding="utf-8")
    accelerate_config: dict[str, Any] = {
        "compute_environment": "LOCAL_MACHINE",
        "distributed_type": "MULTI_GPU",
        "mixed_precision": "no",  # the Trainer's own bf16/fp16 arguments decide (placement.py)
        "use_cpu": not on_cuda,
        "debug": False,
        "num_processes": loaded.config.num_processes,
        "num_machines": 1,
        "machine_rank": 0,
        "gpu_ids": "all",
        "rdzv_backend": "static",
        "same_network": True,
        "main_training_function": "main",
    }
    config_path = directory / "accelerate.yaml"
    config_path.write_text(yaml.safe_dump(accelerate_config, sort_keys=False), encoding="utf-8")
    return spec_path, config_path


def launcher_command(num_processes: int, threads: int, spec_path: Path, accelerate_config: Path) -> list[str]:
    """`accelerate launch` of the worker module, as this interpreter runs it.

    --multi_gpu on the CPU too: it is the launcher that starts N local processes (torchrun); `--cpu` starts
    one process unless mpirun is set up. Each rank's TrainingArguments (use_cpu, ddp_backend) then make the
    process group gloo on the CPU and NCCL on GPUs. Port 0: accelerate picks a free one, so two canaries on
    one runner do not collide.
    """
    return [
        sys.executable, "-m", "accelerate.commands.launch",
        "--config_file", str(accelerate_config),
        "--multi_gpu",
        "--num_processes", str(num_processes),
        "--num_machines", "1",
        "--main_process_port", "0",
        "--num_cpu_threads_per_process", str(threads),
        "--mixed_precision", "no",
        "--dynamo_backend", "no",
        "--module", "canary_action.train.launch.rank_worker",
        "--spec", str(spec_path),
    ]  # fmt: skip


def collect_ranks(directory: Path, world_size: int) -> list[RankRun]:
    """What each rank left: its streamed rows and, when it got to write one, its record."""
    runs = []
    for rank in range(world_size):
        path = record_path(directory, rank)
        record = RankRecord.model_validate_json(path.read_text(encoding="utf-8")) if path.exists() else None
        runs.append(RankRun(rank=rank, series=read_rows(steps_path(directory, rank)), record=record))
    return runs


def _run_launcher(command: list[str], limit_s: float) -> int:
    # The ranks' output goes to stderr: stdout belongs to `canary run`'s summary. A stderr without a file
    # descriptor (a Jupyter kernel's, `api.run` in a notebook) gets their lines copied into it instead.
    relay = not _has_descriptor(sys.stderr)
    with subprocess.Popen(
        command,
        stdout=subprocess.PIPE if relay else sys.stderr,
        stderr=subprocess.STDOUT if relay else None,
        env=safe_path_environment(),
    ) as launcher:
        copier = _copy_to_stderr(launcher.stdout) if relay and launcher.stdout is not None else None
        try:
            code = launcher.wait(timeout=limit_s)
            if copier is not None:
                copier.join()  # the pipe closes when the launcher and its workers have exited
            return code
        except subprocess.TimeoutExpired:
            _stop(launcher)
            raise LaunchTimeoutError(
                f"the launcher ran past timeout_minutes + {LAUNCH_MARGIN_S // 60} min and was stopped (a hang?)"
            ) from None
        except KeyboardInterrupt:
            _stop(launcher)  # Ctrl-C in a terminal reached it too; from a CI cancel it may not have
            raise


def _has_descriptor(stream: TextIO) -> bool:
    try:
        stream.fileno()
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is both of the last two
        return False
    return True


def _copy_to_stderr(pipe: IO[bytes]) -> threading.Thread:
    def copy() -> None:
        for line in pipe:
            sys.stderr.write(line.decode("utf-8", errors="replace"))
            sys.stderr.flush()

    copier = threading.Thread(target=copy, name="canary-launcher-output", daemon=True)
    copier.start()
    return copier


def _stop(launcher: subprocess.Popen[bytes]) -> None:
    """SIGTERM: torchrun ends its workers (SIGTERM, then SIGKILL after 30 s) and exits; SIGKILL if it does not."""
    launcher.terminate()
    try:
        launcher.wait(timeout=_STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        launcher.kill()
        launcher.wait()


def _write(
    *,
    loaded: LoadedConfig,
    run_id: str,
    run_dir: Path,
    started: datetime,
    runs: list[RankRun],
    status: m.Status,
    threads: int,
    notices: list[str],
    warnings: list[str],
    heldout: HeldoutEval | None = None,
) -> m.Metrics:
    config = loaded.config
    world = config.num_processes
    series = merge_series(runs, world)
    steps = profiler_steps(config)
    summary = summarize(series, warmup=config.metrics_warmup_steps, profiler_steps=steps) if series else None
    dist_summary = None
    base = base_run(runs)
    if runs:
        steady = steady_rows(series, warmup_steps=summary.warmup_steps, profiler_steps=steps) if summary else []
        step_column = series.get(m.STEP, [])
        dist_summary = distributed_summary(
            runs,
            world_size=world,
            strategy=distributed.settings(config).strategy,
            backend=next((r.record.backend for r in runs if r.record and r.record.backend), None),
            steady_steps={s for i in steady if (s := step_column[i]) is not None},
        )
    lead = base.record if base is not None else None
    metrics = assemble_metrics(
        config,
        run_id=run_id,
        started=started,
        series=series,
        summary=summary,
        non_finite=merge_non_finite(runs),
        workload=lead.workload if lead else None,
        profiler=lead.profiler if lead else None,
        status=status,
        notices=_unique(notices + (lead.notices if lead else [])),
        warnings=warnings + _rank_warnings(runs),
        distributed_summary=dist_summary,
        torch_threads=threads,
        heldout=heldout,
    )
    write_metrics(metrics, run_dir / "metrics.json")
    return metrics


def _failure(runs: list[RankRun], status: m.Status, run_dir: Path, cause: BaseException | None) -> CanaryError:
    """The error `canary run` raises: the failing rank's own ConfigError (exit 2) or a TrainingError (exit 3)."""
    first = first_failure(runs)
    if first is not None and status.exception_type == "ConfigError":
        return ConfigError(status.message or "the config was refused", fix=first.fix or "")
    log = run_dir / "ranks" / f"rank{first.rank}.error.log" if first is not None else None
    if log is not None and log.exists():
        shutil.copyfile(log, run_dir / "error.log")  # where a single-process run keeps its traceback
        where = f"read the traceback in {run_dir / 'error.log'}"
    else:
        where = "read the ranks' output above"
    error = TrainingError(
        f"{status.exception_type} during {status.stage}: {status.message}",
        fix=f"{where}; what was measured is in {run_dir / 'metrics.json'}",
        metrics_path=run_dir / "metrics.json",
    )
    error.__cause__ = cause
    return error


def _rank_warnings(runs: list[RankRun]) -> list[str]:
    """Each rank's warnings, once per text, naming the ranks that gave it."""
    by_text: dict[str, list[int]] = {}
    for run in runs:
        for text in run.record.warnings if run.record else []:
            by_text.setdefault(text, []).append(run.rank)
    return [f"rank {', '.join(map(str, ranks))}: {text}" for text, ranks in by_text.items()]


def _unique(items: list[str]) -> list[str]:
    return list(dict.fromkeys(items))
