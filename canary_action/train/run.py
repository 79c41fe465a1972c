"""One canary process, start to finish: preflight, build, train, and what it measured.

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
import time
import traceback
import warnings
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any

import torch
from transformers.trainer_callback import PrinterCallback

from canary_action import __version__
from canary_action.config.load import LoadedConfig, config_hash
from canary_action.config.schema import CommonConfig, factory_of
from canary_action.errors import CanaryError
from canary_action.fingerprint import collect_environment, git_revision
from canary_action.metrics import schema as m
from canary_action.metrics.heldout import HeldoutEval
from canary_action.metrics.io import write_metrics
from canary_action.metrics.merge import RankRecord
from canary_action.metrics.stream import KILLED, KILLED_MESSAGE, STEPS_FILE
from canary_action.metrics.summarize import stability_of, summarize
from canary_action.train import custom, data, distributed
from canary_action.train.callback import MetricsCallback, RunRecord, StepCounters, StepGate, TrainingStopped
from canary_action.train.capture import StepCapture
from canary_action.train.comm import CommTimer
from canary_action.train.gpu_time import KernelClock, clock_for
from canary_action.train.instrument import instrument
from canary_action.train.placement import Placement, apply_cpu_threads, resolve_placement
from canary_action.train.probes import DeviceProbe
from canary_action.train.profiler import ProfilerWindow
from canary_action.train.progress import ProgressLine, StageLines
from canary_action.train.ranks import RankContext, RankSync
from canary_action.train.setup import TrainingSetup, drop_empty_trainer_dir
from canary_action.train.snapshots import Snapshots
from canary_action.train.stages import StageLog, announce_stages, current_stage, stage
from canary_action.train.stream import RowStream


def family_module(training_type: str) -> ModuleType:
    """The module named after the training type: train/sft.py, train/dpo.py, ..."""
    return importlib.import_module(f"canary_action.train.{training_type}")


class CanaryRun:
    """The state of one run while it executes; `finish` turns it into metrics.json.

    Under the launcher (num_processes > 1) each rank runs one of these with its RankContext: it adds the
    communication timer and the rank's bookkeeping, prints progress and profiles on rank 0 only, and ends
    with `rank_record()` instead of `finish()` (launch/ranks.py merges the ranks). A lockstep side passes a
    StepGate, which holds the run between steps until its turn comes (launch/pair_side.py).
    """

    def __init__(
        self,
        loaded: LoadedConfig,
        run_dir: Path,
        rank: RankContext | None = None,
        gate: StepGate | None = None,
        label: str | None = None,
    ) -> None:
        self.loaded = loaded
        self.gate = gate
        self.config = loaded.config
        self.label = label or loaded.config.name  # what its log lines start with: `[tiny-dpo head] step 4/50`
        self.run_dir = run_dir
        self.rank = rank
        self.record = RunRecord()
        self.notices = list(loaded.notices)
        self.warnings: list[str] = []
        self.placement: Placement | None = None
        self.workload: m.Workload | None = None
        self.profiler: ProfilerWindow | None = None
        self.clock: KernelClock | None = None
        self.stage_log = StageLog()  # where the time before step 1 goes (metrics.json run.startup_s)
        self.metrics_callback: MetricsCallback | None = None
        self.capture: StepCapture | None = None
        self.sync: RankSync | None = None
        self.stream: RowStream | None = None
        self.status = m.Status(state="completed")
        self.failure: tuple[float, str | None] | None = None  # (unix time, a CanaryError's fix)
        self.snapshots: Snapshots | None = None
        """Saves the trained weights for the held-out evaluation (the lead process only)."""
        self.heldout: HeldoutEval | None = None
        """The held-out evaluation, when whoever started this run had it done (launch/single.py)."""

    def execute(self) -> None:
        lead = self.rank is None or self.rank.rank == 0
        # The lead process says what it is loading, one line a stage: the minute before step 1 is not silence.
        with self.stage_log, announce_stages(StageLines(self.config, self.label)) if lead else contextlib.nullcontext():
            self._execute(lead)

    def _execute(self, lead: bool) -> None:
        config = self.config
        with stage("preflight"):
            family = family_module(config.training_type)
            family.preflight(config)
            # A team's own trainer of this type: built by its function, counted as the type counts.
            builder = custom if factory_of(config) is not None else family
            if builder is not family:
                builder.preflight(config)
            if self.rank is not None and config.device != "cpu" and torch.cuda.is_available():
                torch.cuda.set_device(self.rank.local_rank)  # before placement: each rank measures its own GPU
            self.placement = placement = resolve_placement(config)
            apply_cpu_threads(config, placement)
            self.notices += placement.notices
            probe = DeviceProbe(placement.device)
            self.warnings += probe.warnings + [f"before training: {w}" for w in probe.health()]
        counters = StepCounters()
        self.clock = clock_for(
            enabled=config.gpu_time, on_cuda=placement.on_cuda, skipped=self._profiler_steps(),
            chunk_steps=self.gate.chunk_steps if self.gate is not None else None,
        )  # fmt: skip
        callbacks, comm = self._callbacks(lead, placement, probe, counters)
        setup: TrainingSetup[Any] = TrainingSetup(config, placement, self.run_dir, callbacks, self.notices)
        with stage("build"):
            trainer = builder.build_trainer(setup)
            # With tqdm off the Trainer prints every log dict; the progress line replaces that.
            trainer.remove_callback(PrinterCallback)
            capture = self.capture if self.capture is not None and self.capture.enabled else None
            instrument(trainer, counters, probe, family.count_batch, config.fault_injection, capture=capture)
            if self.snapshots is not None:
                self.snapshots.attach(trainer, setup)
            if comm is not None:
                comm.attach(trainer)
            self.workload = _workload(trainer, setup, placement)
        with stage("train"), contextlib.suppress(TrainingStopped):
            trainer.train()
        if self.snapshots is not None:
            self.snapshots.final(self.record.num_steps)
        self._ended(probe)

    def _callbacks(
        self, lead: bool, placement: Placement, probe: DeviceProbe, counters: StepCounters
    ) -> tuple[list[Any], CommTimer | None]:
        """The trainer's callbacks, MetricsCallback first; and the communication timer of a launched rank."""
        config = self.config
        if config.profiler.enabled and lead:
            self.profiler = ProfilerWindow(
                config.profiler, self.run_dir / config.profiler.output_dir, placement.on_cuda
            )
        if lead:
            self.snapshots = Snapshots(config, self.run_dir)
        between: list[Any] = [w for w in (self.profiler, self.snapshots) if w is not None]
        self.metrics_callback = MetricsCallback(
            self.record,
            counters,
            probe,
            stop_on_non_finite=config.stop_on_non_finite,
            timeout_s=config.timeout_minutes * 60,
            profiler_steps=self._profiler_steps(),
            gate=self.gate,
            between=between,  # the profiler's start and export, and snapshots: outside every step
            clock=self.clock,
        )
        # Every process captures its own batches (a rank's folder is named after it): train/capture.py.
        self.capture = StepCapture(
            config.capture, self.run_dir, self.rank.rank if self.rank is not None else 0,
            config.model_dump(mode="json"), self.notices,
        )  # fmt: skip
        callbacks: list[Any] = [self.metrics_callback]
        if self.capture.enabled:
            callbacks.append(self.capture)
        if lead:
            callbacks.append(ProgressLine(self.record, config.max_steps, self.label))
        comm = None
        if self.rank is None:  # after MetricsCallback, which creates each step's row
            self.stream = RowStream(self.record, self.run_dir / STEPS_FILE)
            callbacks.append(self.stream)
        else:
            comm = CommTimer(self.record, self.rank.rank, placement.on_cuda, self.warnings)
            self.sync = RankSync(self.record, self.rank)
            callbacks += [comm, self.sync]
        if self.profiler is not None:  # for on_train_end: a run that stops inside the window keeps its trace
            callbacks.append(self.profiler)
        return callbacks, comm

    def _ended(self, probe: DeviceProbe) -> None:
        """How training ended, and what the device said after it."""
        self.warnings += [f"after training: {w}" for w in probe.health()]  # thermal throttling shows under load
        if self.clock is not None:
            self.warnings += self.clock.warnings(self.record.num_steps)
        if self.record.stop_reason is not None:
            self.status = m.Status(state="stopped_early", reason=self.record.stop_reason, step=self.record.stop_step)
        elif self.record.num_steps < self.config.max_steps:
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
        self.failure = (time.time(), error.fix if isinstance(error, CanaryError) else None)
        log = self.rank.error_log if self.rank is not None else self.run_dir / "error.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text("".join(traceback.format_exception(error)))

    def provisional(self, run_id: str, started: datetime, pair: m.PairSide | None = None) -> None:
        """metrics.json as a killed run leaves it (metrics/stream.py): replaced by `finish`, rebuilt with the
        streamed steps by the parent when the process dies first."""
        status = m.Status(state="failed", reason=KILLED, stage="preflight", message=KILLED_MESSAGE)
        metrics = assemble_metrics(
            self.config, run_id=run_id, started=started, series={}, summary=None, non_finite=[], workload=None,
            profiler=None, status=status, notices=self.notices, warnings=[], pair=pair,
        )  # fmt: skip
        write_metrics(metrics, self.run_dir / "metrics.json")

    def finish(self, run_id: str, started: datetime, pair: m.PairSide | None = None) -> m.Metrics:
        if self.stream is not None:
            self.stream.flush()
        self._end_notices()
        drop_empty_trainer_dir(self.run_dir)
        series = self.record.series()
        warmup = self.config.metrics_warmup_steps
        metrics = assemble_metrics(
            self.config,
            run_id=run_id,
            started=started,
            series=series,
            summary=summarize(series, warmup=warmup, profiler_steps=self._profiler_steps()) if series else None,
            non_finite=self.record.non_finite,
            workload=self.workload,
            profiler=self.profiler.summary if self.profiler else None,
            status=self.status,
            notices=self.notices,
            warnings=self.warnings,
            pair=pair,
            startup_s=self.startup_s(),
            heldout=self.heldout,
        )
        write_metrics(metrics, self.run_dir / "metrics.json")
        return metrics

    def startup_s(self) -> dict[str, float]:
        first_step = self.metrics_callback.first_step_at if self.metrics_callback is not None else None
        return self.stage_log.startup(first_step)

    def rank_record(self) -> RankRecord:
        """This rank's end, for the launcher to merge (its rows are in the steps file: flushed here)."""
        assert self.rank is not None, "rank records belong to launched ranks"
        if self.sync is not None:
            self.sync.flush()
        self._end_notices()
        drop_empty_trainer_dir(self.run_dir)
        return RankRecord(
            rank=self.rank.rank,
            status=self.status,
            non_finite=self.record.non_finite,
            notices=self.notices,
            warnings=self.warnings,
            workload=self.workload,
            profiler=self.profiler.summary if self.profiler else None,
            backend=distributed.backend(self.config, self.placement.on_cuda) if self.placement else None,
            fix=self.failure[1] if self.failure else None,
            failed_at=self.failure[0] if self.failure else None,
        )

    def _profiler_steps(self) -> range | None:
        return profiler_steps(self.config)

    def _end_notices(self) -> None:
        """What the end of the run did to what was asked: a profiler window it never (or only partly) reached."""
        shortfall = self.profiler.shortfall(self.status, self.record.num_steps) if self.profiler else None
        if shortfall is not None and shortfall not in self.notices:
            self.notices.append(shortfall)
        if self.capture is not None:
            for line in (self.capture.summary(), self.capture.missed(self.record.num_steps)):
                if line is not None and line not in self.notices:
                    self.notices.append(line)


def profiler_steps(config: CommonConfig) -> range | None:
    profiler = config.profiler
    return range(profiler.start_step, profiler.start_step + profiler.num_steps) if profiler.enabled else None


def assemble_metrics(
    config: CommonConfig,
    *,
    run_id: str,
    started: datetime,
    series: dict[str, list[float | None]],
    summary: m.Summary | None,
    non_finite: list[m.NonFiniteEvent],
    workload: m.Workload | None,
    profiler: m.ProfilerSummary | None,
    status: m.Status,
    notices: list[str],
    warnings: list[str],
    distributed_summary: m.Distributed | None = None,
    torch_threads: int | None = None,
    pair: m.PairSide | None = None,
    startup_s: dict[str, float] | None = None,
    heldout: HeldoutEval | None = None,
) -> m.Metrics:
    """metrics.json of a run: its measurements plus identity, environment and the stability findings."""
    finished = datetime.now(UTC)
    sha, dirty = git_revision(Path.cwd())
    stability = stability_of(series, non_finite)
    return m.Metrics(
        run=m.RunIdentity(
            run_id=run_id,
            config_name=config.name,
            config_hash=config_hash(config),
            canary_version=__version__,
            git_sha=sha,
            git_dirty=dirty,
            started_at=_iso(started),
            finished_at=_iso(finished),
            duration_s=(finished - started).total_seconds(),
            startup_s=startup_s or {},
        ),
        env=collect_environment(torch_threads=torch_threads),
        workload=workload,
        config=config.model_dump(mode="json"),
        series=series,
        summary=summary,
        stability=stability,
        profiler=profiler,
        distributed=distributed_summary,
        pair=pair,
        heldout=heldout,
        status=status,
        notices=notices,
        measurement_warnings=warnings,
    )


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


def quiet_libraries() -> None:
    """datasets' and transformers' own bars flood a CI log; the canary prints one progress line instead.

    Each line a library logs is printed once: huggingface_hub and datasets (and transformers when CI is set, as on
    GitHub's runners) print through a handler of their own *and* pass the record on to the root logger, where the
    CLI's handler printed it a second time.
    """
    import datasets
    import huggingface_hub.utils.logging
    import transformers

    datasets.disable_progress_bars()
    # TRL <= 1.16 asks models for is_gradient_checkpointing, deprecated in transformers 5: noise in every log.
    warnings.filterwarnings("ignore", message="`is_gradient_checkpointing` is deprecated", category=FutureWarning)
    transformers.utils.logging.disable_progress_bar()  # type: ignore[no-untyped-call]
    for library in (huggingface_hub.utils.logging, datasets.utils.logging, transformers.utils.logging):
        library.disable_propagation()


def _iso(moment: datetime) -> str:
    return moment.isoformat(timespec="seconds").replace("+00:00", "Z")
