"""One canary run, start to finish: preflight, build, train, and always write metrics.json.

The steps are the same for every family; the family module (`canary_action.train.<training_type>`, all with
the same four functions: preflight, prepare_dataset, build_trainer, count_batch) supplies what differs.
Whatever happens after the config is loaded — a refused config, a crash, Ctrl-C — metrics.json is written
with everything measured so far and a status saying how the run ended.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import json
import traceback
import warnings
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any

from transformers.trainer_callback import PrinterCallback

from canary_action import __version__
from canary_action.config.load import LoadedConfig, config_hash
from canary_action.errors import CanaryError, TrainingError
from canary_action.fingerprint import collect_environment, git_revision
from canary_action.metrics import schema as m
from canary_action.metrics.io import write_metrics
from canary_action.metrics.summarize import find_divergence, find_grad_norm_spikes, summarize
from canary_action.train import data
from canary_action.train.callback import MetricsCallback, RunRecord, StepCounters, TrainingStopped
from canary_action.train.instrument import instrument
from canary_action.train.placement import Placement, resolve_placement
from canary_action.train.probes import DeviceProbe
from canary_action.train.profiler import ProfilerWindow
from canary_action.train.progress import ProgressLine
from canary_action.train.setup import TrainingSetup
from canary_action.train.stages import current_stage, reset_stage, stage


@dataclass(frozen=True)
class RunOutcome:
    metrics: m.Metrics
    metrics_path: Path


def family_module(training_type: str) -> ModuleType:
    """The module named after the training type: train/sft.py, train/dpo.py, ..."""
    return importlib.import_module(f"canary_action.train.{training_type}")


def run_canary(loaded: LoadedConfig, output_dir: Path | None = None) -> RunOutcome:
    config = loaded.config
    started = datetime.now(UTC)
    run_id = f"{config.name}-{started:%Y%m%dT%H%M%SZ}"
    run_dir = (output_dir or Path(config.output_dir)) / run_id
    run_dir.mkdir(parents=True, exist_ok=True)
    run = _Run(loaded, run_dir)
    reset_stage()
    _quiet_library_progress_bars()
    try:
        run.execute()
    except BaseException as error:  # everything, Ctrl-C included: the measurements are written first
        run.fail(error)
        metrics = run.finish(run_id, started)
        if isinstance(error, CanaryError):
            raise
        if isinstance(error, KeyboardInterrupt):
            raise
        raise TrainingError(
            f"{type(error).__name__} during {metrics.status.stage}: {error}",
            fix=f"read the traceback in {run_dir / 'error.log'}; what was measured is in {run_dir / 'metrics.json'}",
            metrics_path=run_dir / "metrics.json",
        ) from error
    return RunOutcome(run.finish(run_id, started), run_dir / "metrics.json")


class _Run:
    """The state of one run while it executes; `finish` turns it into metrics.json."""

    def __init__(self, loaded: LoadedConfig, run_dir: Path) -> None:
        self.loaded = loaded
        self.config = loaded.config
        self.run_dir = run_dir
        self.record = RunRecord()
        self.notices = list(loaded.notices)
        self.warnings: list[str] = []
        self.placement: Placement | None = None
        self.workload: m.Workload | None = None
        self.profiler: ProfilerWindow | None = None
        self.status = m.Status(state="completed")

    def execute(self) -> None:
        config = self.config
        with stage("preflight"):
            family = family_module(config.training_type)
            family.preflight(config)
            self.placement = placement = resolve_placement(config)
            self.notices += placement.notices
            probe = DeviceProbe(placement.device)
            self.warnings += probe.warnings + [f"before training: {w}" for w in probe.health()]
        counters = StepCounters()
        callbacks: list[Any] = [
            MetricsCallback(
                self.record,
                counters,
                probe,
                stop_on_non_finite=config.stop_on_non_finite,
                timeout_s=config.timeout_minutes * 60,
                profiler_steps=self._profiler_steps(),
            ),
            ProgressLine(self.record, config.max_steps, config.name),
        ]
        if config.profiler.enabled:
            self.profiler = ProfilerWindow(
                config.profiler, self.run_dir / config.profiler.output_dir, placement.on_cuda
            )
            callbacks.append(self.profiler)
        setup: TrainingSetup[Any] = TrainingSetup(config, placement, self.run_dir, callbacks, self.notices)
        with stage("build"):
            trainer = family.build_trainer(setup)
            # With tqdm off the Trainer prints every log dict; the progress line replaces that.
            trainer.remove_callback(PrinterCallback)
            instrument(trainer, counters, probe, family.count_batch, config.fault_injection)
            self.workload = _workload(trainer, setup, placement)
        with stage("train"), contextlib.suppress(TrainingStopped):
            trainer.train()
        self.warnings += [f"after training: {w}" for w in probe.health()]  # thermal throttling shows under load
        if self.record.stop_reason is not None:
            self.status = m.Status(state="stopped_early", reason=self.record.stop_reason, step=self.record.stop_step)
        elif self.record.num_steps < config.max_steps:
            self.status = m.Status(state="stopped_early", reason="trainer", step=self.record.num_steps)

    def fail(self, error: BaseException) -> None:
        failed_stage = current_stage()
        self.status = m.Status(
            state="failed",
            reason="interrupted" if isinstance(error, KeyboardInterrupt) else "error",
            step=self.record.num_steps + 1 if failed_stage == "train" else None,
            stage=failed_stage,
            exception_type=type(error).__name__,
            message=str(error)[:2000],
        )
        (self.run_dir / "error.log").write_text("".join(traceback.format_exception(error)))

    def finish(self, run_id: str, started: datetime) -> m.Metrics:
        finished = datetime.now(UTC)
        series = self.record.series()
        sha, dirty = git_revision(Path.cwd())
        events = self.record.non_finite
        divergence = find_divergence(series.get(m.LOSS, []))
        stability = m.Stability(
            non_finite=events,
            num_nan_steps=len({e.step for e in events if e.value == "nan"}),
            num_inf_steps=len({e.step for e in events if e.value != "nan"}),
            loss_diverged=divergence is not None,
            divergence_step=divergence,
            grad_norm_spikes=find_grad_norm_spikes(series.get(m.GRAD_NORM, []), series.get(m.STEP, [])),
        )
        metrics = m.Metrics(
            run=m.RunIdentity(
                run_id=run_id,
                config_name=self.config.name,
                config_hash=config_hash(self.config),
                canary_version=__version__,
                git_sha=sha,
                git_dirty=dirty,
                started_at=_iso(started),
                finished_at=_iso(finished),
                duration_s=(finished - started).total_seconds(),
            ),
            env=collect_environment(),
            workload=self.workload,
            config=self.config.model_dump(mode="json"),
            series=series,
            summary=summarize(series, warmup=self.config.metrics_warmup_steps, profiler_steps=self._profiler_steps())
            if series
            else None,
            stability=stability,
            profiler=self.profiler.summary if self.profiler else None,
            status=self.status,
            notices=self.notices,
            measurement_warnings=self.warnings,
        )
        write_metrics(metrics, self.run_dir / "metrics.json")
        return metrics

    def _profiler_steps(self) -> range | None:
        profiler = self.config.profiler
        return range(profiler.start_step, profiler.start_step + profiler.num_steps) if profiler.enabled else None


def _workload(trainer: Any, setup: TrainingSetup[Any], placement: Placement) -> m.Workload:
    model = trainer.model
    architecture = {
        k: v for k, v in model.config.to_dict().items() if k not in ("_name_or_path", "transformers_version")
    }
    # The examples as loaded (before the trainer's tokenization), or a custom trainer's own dataset.
    loaded = setup.dataset_if_loaded()
    examples = loaded if loaded is not None else trainer.train_dataset
    return m.Workload(
        device=str(placement.device),
        dtype=placement.dtype,
        model_name=setup.config.model_name,
        model_fingerprint=hashlib.sha256(json.dumps(architecture, sort_keys=True, default=str).encode()).hexdigest(),
        num_parameters=sum(p.numel() for p in model.parameters()),
        num_trainable_parameters=sum(p.numel() for p in model.parameters() if p.requires_grad),
        dataset_name=setup.config.dataset_name,
        dataset_fingerprint=data.fingerprint(examples),
        num_examples=len(examples),
    )


def _quiet_library_progress_bars() -> None:
    """datasets' and transformers' own bars flood a CI log; the canary prints one progress line instead."""
    import datasets
    import transformers

    datasets.disable_progress_bars()
    # TRL <= 1.16 asks models for is_gradient_checkpointing, deprecated in transformers 5: noise in every log.
    warnings.filterwarnings("ignore", message="`is_gradient_checkpointing` is deprecated", category=FutureWarning)
    transformers.utils.logging.disable_progress_bar()  # type: ignore[no-untyped-call]


def _iso(moment: datetime) -> str:
    return moment.isoformat(timespec="seconds").replace("+00:00", "Z")
