"""The evaluator process: `python -I -m canary_action.evaluate --job JOB.json`, started by client.py.

Until it is told to go (a line "go" on stdin) it runs at idle priority where it may come back from it (SCHED_IDLE:
only on a CPU nothing else wants; priority.py) and computes nothing: it imports the libraries, loads the held-out
examples and tokenizes them, so that this cost lies beside the training, not after it. Then, at normal priority
(the starter brings it back as it says go, finished preparing or not), it scores each
subject's starting model and every snapshot its training left, and writes the results (plan.EvalResults) to the
job's output file. "stop", or the end of stdin, ends it without evaluating. Exit status 0 when the results are
written (a subject that could not be evaluated says so in its result), 2 when the job itself is unreadable.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shutil
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from canary_action.evaluate.plan import (
    MAX_OWN_BYTES,
    OWN_FILE,
    REFUSAL_FILE,
    SNAPSHOT_DIR,
    EvalJob,
    EvalResults,
    Subject,
    snapshot_steps,
)
from canary_action.evaluate.priority import can_leave_idle, set_policy, threads
from canary_action.metrics.heldout import HeldoutEval, HeldoutPoint

_SNAPSHOT_NAME = re.compile(r"step-(\d{6})")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m canary_action.evaluate")
    parser.add_argument("--job", type=Path, required=True, help="The job (canary_action.evaluate.plan.EvalJob).")
    args = parser.parse_args(argv)
    if can_leave_idle():
        set_policy(None, idle=True)
    try:
        job = EvalJob.model_validate_json(args.job.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        print(f"rlhf-canary evaluator: unreadable job {args.job}: {error}", file=sys.stderr)
        return 2
    # The starter's CPUs, from before it pinned this process away from a pair's training CPUs.
    cpus = set(job.cpus) if job.cpus else os.sched_getaffinity(0)
    started = time.monotonic()
    try:
        prepared: Prepared | str = Prepared.make(job)
    except Exception as error:  # said in every subject's result, once told to go
        traceback.print_exc()
        prepared = f"the held-out evaluation could not be prepared: {type(error).__name__}: {str(error)[:500]}"
    if sys.stdin.readline().strip() != "go":
        return 0
    set_policy(None, idle=False)  # the starter did, as it said go; again for threads started since
    _use(cpus, prepared)
    go = time.monotonic()
    evaluations: dict[str, HeldoutEval] = {}
    # Trusted subjects first (a pair's base side), and the results written after each: whatever the next one
    # does (a pull request's side run into the time limit), what is done stays done.
    for subject in sorted(job.subjects, key=lambda s: not s.trusted):
        if isinstance(prepared, str):
            evaluations[subject.name] = HeldoutEval(status="failed", message=prepared)
            continue
        try:
            evaluations[subject.name] = prepared.evaluate(subject)
        except Exception as error:
            traceback.print_exc()
            why = f"the evaluation of the {subject.name} run broke: {type(error).__name__}: {str(error)[:500]}"
            evaluations[subject.name] = HeldoutEval(status="failed", message=why)
        _write(Path(job.output), evaluations)
    print(
        f"rlhf-canary evaluator: prepared in {go - started:.1f} s, evaluated in {time.monotonic() - go:.1f} s",
        file=sys.stderr,
    )
    _write(Path(job.output), evaluations)
    if not isinstance(prepared, str):
        shutil.rmtree(prepared.loader.scratch, ignore_errors=True)
    sys.stderr.flush()
    os._exit(0)  # the results are written: torch's teardown (a few tenths of a second) would only delay the caller


def _write(output: Path, evaluations: dict[str, HeldoutEval]) -> None:
    with tempfile.NamedTemporaryFile("w", dir=output.parent, delete=False, encoding="utf-8") as partial:
        partial.write(EvalResults(evaluations=evaluations).model_dump_json(indent=2))
    Path(partial.name).replace(output)


def _use(cpus: set[int], prepared: Prepared | str) -> None:
    """Training has ended: back on every CPU this process started with, one torch thread each (at most 8). The two
    sides of a pair are scored with the same threads, so their figures compare exactly; separate runs on one kind
    of runner too."""
    for task in threads():
        with contextlib.suppress(OSError):
            os.sched_setaffinity(task, cpus)
    if not isinstance(prepared, str) and prepared.device.type == "cpu":
        import torch

        torch.set_num_threads(min(len(cpus), 8))


class Prepared:
    """The trusted config's held-out set and scorer, and the models' loader."""

    def __init__(self, job: EvalJob) -> None:
        import torch

        from canary_action.config.load import parse_config
        from canary_action.evaluate.examples import heldout_set
        from canary_action.evaluate.models import Loader
        from canary_action.evaluate.scorer import Scorer

        self.job = job
        self.trusted = parse_config(job.trusted_config, source="the trusted config").config
        threads = self.trusted.cpu_threads
        torch.set_num_threads(threads if isinstance(threads, int) else 1)
        torch.manual_seed(0)  # a reward model's score head, if new, is drawn the same every time
        on_cuda = job.device == "cuda" or (job.device == "auto" and self.trusted.device != "cpu"
                                           and torch.cuda.is_available())  # fmt: skip
        self.device = torch.device("cuda" if on_cuda else "cpu")
        scratch = Path(job.scratch) if job.scratch else Path(tempfile.mkdtemp(prefix="rlhf-canary-eval-"))
        self.loader = Loader(self.device, scratch, {})
        setup = self.loader.setup(self.trusted)
        self.set = heldout_set(self.trusted, setup.tokenizer)
        self.scorer = Scorer(self.trusted, setup.tokenizer, self.set, self.device, setup.load_model)
        self._starts: dict[Any, HeldoutPoint] = {}
        # Loading is no computing: done now, beside the training — on a CPU (a GPU's memory is the training's
        # until it ends). A subject whose model does not load says so in its own evaluation, not in every one's.
        for subject in job.subjects if self.device.type == "cpu" else []:
            with contextlib.suppress(Exception):
                config = parse_config(subject.config, source=f"the {subject.name} run's config").config
                if self._differs(subject.name, config) is None:
                    self.loader.start(config)

    @classmethod
    def make(cls, job: EvalJob) -> Prepared:
        return cls(job)

    def evaluate(self, subject: Subject) -> HeldoutEval:
        from canary_action.config.load import parse_config
        from canary_action.evaluate.models import SnapshotRefused, load_trained, read_meta, start_key
        from canary_action.files import folders_inside, read_inside

        config = parse_config(subject.config, source=f"the {subject.name} run's config").config
        common = {"metric": self.set.metric, "dataset": self.set.dataset, "num_examples": self.set.size,
                  "fingerprint": self.set.fingerprint}  # fmt: skip
        why = self._differs(subject.name, config)
        if why is not None:
            return HeldoutEval(status="skipped", reason="not_comparable", message=why, **common)
        run_dir = Path(subject.run_dir)
        names, refused = self._planned(folders_inside(run_dir, [SNAPSHOT_DIR]))
        if not names:
            return self._own(subject, run_dir, read_inside, common)
        began = time.monotonic()
        start = self.loader.start(config)
        key = start_key(config)
        if key not in self._starts:  # the same starting model on the same examples: the same point (both sides')
            self._starts[key] = self.scorer.point(start, 0, key)
        points = [self._starts[key].model_copy(deep=True)]
        for name in names:
            try:
                meta = read_meta(run_dir, name)
                if meta.step != int(name.removeprefix("step-")):
                    raise SnapshotRefused(f"snapshot {name} says it is of step {meta.step}")
                _same_adapters(name, meta, config)
                model = load_trained(run_dir, name, meta, start)
            except SnapshotRefused as refusal:
                refused.append(str(refusal))
                continue
            points.append(self.scorer.point(model, meta.step, key))
            del model
        if len(points) == 1:
            return HeldoutEval(status="failed", message="; ".join(refused)[:2000], **common)
        for point in points[1:-1]:
            point.examples.clear()  # only the start's and the end's are kept
        said = "in a fresh process of the canary's own (no team or pull-request code imported)"
        return HeldoutEval(
            status="evaluated", message=said + ("; " + "; ".join(refused) if refused else ""), points=points,
            evaluated_in="fresh_process", wall_s=time.monotonic() - began, **common,
        )  # fmt: skip

    def _differs(self, name: str, config: Any) -> str | None:
        """Why the subject's model does not compare on the trusted held-out set (None: it does)."""
        for key in ("model_name", "model_revision", "tokenizer_name", "seed"):
            if getattr(config, key) != getattr(self.trusted, key):
                return (f"the {name} run trains with another {key} ({getattr(config, key)!r}, not "
                        f"{getattr(self.trusted, key)!r}): its held-out figures would not compare")  # fmt: skip
        return None

    def _planned(self, found: Sequence[str]) -> tuple[list[str], list[str]]:
        """The snapshot folders to read: those of the steps the trusted config plans, and the last one (the end of
        training) if it lies within max_steps; (names in step order, what was left out and why)."""
        steps = {int(m.group(1)): n for n in found if (m := _SNAPSHOT_NAME.fullmatch(n))}
        planned = {s for s in steps if s in set(snapshot_steps(self.trusted))}
        others = [s for s in steps if s not in planned]
        end = max(others, default=None)
        if end is not None and end <= self.trusted.max_steps:
            planned.add(end)
        ignored = sorted(set(steps) - planned)
        said = [f"snapshots of steps the config does not plan were not read ({', '.join(map(str, ignored[:5]))})"]
        return [steps[s] for s in sorted(planned)], said if ignored else []

    def _own(self, subject: Subject, run_dir: Path, read: Callable[..., bytes], common: dict[str, Any]) -> HeldoutEval:
        """A run without snapshots: its training process's own evaluation, where its model could not be rebuilt
        (train/side_evaluation.py), when it scored the same examples and the run is trusted (not a pull request's
        side of a pair: its process is its code's); else why there is nothing to evaluate."""
        name = subject.name
        try:
            said = read(run_dir, [SNAPSHOT_DIR, OWN_FILE], limit=MAX_OWN_BYTES)
        except FileNotFoundError:
            why = self._no_snapshot(run_dir, read)
            return HeldoutEval(status="skipped", reason="no_snapshot", message=why, **common)
        except Exception as error:  # a link, a FIFO, too large: refused, and said
            return HeldoutEval(status="failed", message=f"the {name} run's own evaluation cannot be read: {error}")
        if not subject.trusted:
            why = (f"the {name} run's model is its trainer_factory's own, so only its training process scored it, and "
                   "that process runs the pull request's code: its figure is not taken")  # fmt: skip
            return HeldoutEval(status="skipped", reason="own_process", message=why, **common)
        return self._taken(name, said, common)

    def _taken(self, name: str, said: bytes, common: dict[str, Any]) -> HeldoutEval:
        """A trusted run's own evaluation, when it is one of the same examples."""
        try:
            own = HeldoutEval.model_validate_json(said)
        except ValueError as error:
            return HeldoutEval(
                status="failed", message=f"the {name} run's own evaluation is not one: {str(error)[:300]}"
            )
        if own.status != "evaluated" or own.evaluated_in != "side_process":
            return HeldoutEval(
                status="failed", message=f"the {name} run's own evaluation says {own.status}: {own.message}"
            )
        if own.fingerprint != self.set.fingerprint:
            why = (
                f"the {name} run scored other held-out examples (its own heldout block): its figures would not compare"
            )
            return HeldoutEval(status="skipped", reason="not_comparable", message=why, **common)
        return own

    def _no_snapshot(self, run_dir: Path, read: Callable[..., bytes]) -> str:
        try:
            said = read(run_dir, [SNAPSHOT_DIR, REFUSAL_FILE], limit=4096).decode("utf-8", errors="replace").strip()
        except Exception:  # no reason written: the run ended before its first snapshot
            said = ""
        return f"no snapshot to evaluate: {said}" if said else "no snapshot to evaluate: the run ended before one"


def _same_adapters(name: str, meta: Any, config: Any) -> None:
    """A config that trains LoRA adapters (use_peft) says what they are: the snapshot's must be those."""
    if not config.use_peft:
        return  # the model's own weights, or a factory's own adapters (bounded by LoraSpec)
    lora = meta.lora
    if lora is None or (lora.r, lora.lora_alpha, lora.lora_dropout) != (
        config.lora_r,
        config.lora_alpha,
        config.lora_dropout,
    ):
        from canary_action.evaluate.models import SnapshotRefused

        raise SnapshotRefused(f"snapshot {name}: its adapters are not the config's (lora_r, lora_alpha, lora_dropout)")
