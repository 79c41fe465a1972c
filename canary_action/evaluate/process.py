"""The evaluator process: `python -I -m canary_action.evaluate --job JOB.json`, started by client.py.

Until it is told to go (a line "go" on stdin) it runs at idle priority (SCHED_IDLE: only on a CPU nothing else
wants) and computes nothing: it imports the libraries, loads the held-out examples and tokenizes them, so that
this cost lies beside the training, not after it. Then, at normal priority where it may, it scores each
subject's starting model and every snapshot its training left, and writes the results (plan.EvalResults) to the
job's output file. "stop", or the end of stdin, ends it without evaluating. Exit status 0 when the results are
written (a subject that could not be evaluated says so in its result), 2 when the job itself is unreadable.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from canary_action.evaluate.plan import REFUSAL_FILE, SNAPSHOT_DIR, EvalJob, EvalResults, Subject
from canary_action.metrics.heldout import HeldoutEval, HeldoutPoint

_SNAPSHOT_NAME = re.compile(r"step-(\d{6})")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m canary_action.evaluate")
    parser.add_argument("--job", type=Path, required=True, help="The job (canary_action.evaluate.plan.EvalJob).")
    args = parser.parse_args(argv)
    cpus = os.sched_getaffinity(0)  # before whoever started it pins it away from a pair's training CPUs
    _set_priority(idle=True)
    try:
        job = EvalJob.model_validate_json(args.job.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        print(f"rlhf-canary evaluator: unreadable job {args.job}: {error}", file=sys.stderr)
        return 2
    started = time.monotonic()
    try:
        prepared: Prepared | str = Prepared.make(job)
    except Exception as error:  # said in every subject's result, once told to go
        traceback.print_exc()
        prepared = f"the held-out evaluation could not be prepared: {type(error).__name__}: {str(error)[:500]}"
    if sys.stdin.readline().strip() != "go":
        return 0
    _set_priority(idle=False)
    _use(cpus, prepared)
    go = time.monotonic()
    evaluations = {}
    for subject in job.subjects:
        if isinstance(prepared, str):
            evaluations[subject.name] = HeldoutEval(status="failed", message=prepared)
            continue
        try:
            evaluations[subject.name] = prepared.evaluate(subject)
        except Exception as error:
            traceback.print_exc()
            why = f"the evaluation of the {subject.name} run broke: {type(error).__name__}: {str(error)[:500]}"
            evaluations[subject.name] = HeldoutEval(status="failed", message=why)
    print(
        f"rlhf-canary evaluator: prepared in {go - started:.1f} s, evaluated in {time.monotonic() - go:.1f} s",
        file=sys.stderr,
    )
    output = Path(job.output)
    with tempfile.NamedTemporaryFile("w", dir=output.parent, delete=False, encoding="utf-8") as partial:
        partial.write(EvalResults(evaluations=evaluations).model_dump_json(indent=2))
    Path(partial.name).replace(output)
    return 0


def _use(cpus: set[int], prepared: Prepared | str) -> None:
    """Training has ended: back on every CPU this process started with, one torch thread each (at most 8). The two
    sides of a pair are scored with the same threads, so their figures compare exactly; separate runs on one kind
    of runner too."""
    for task in _threads():
        with contextlib.suppress(OSError):
            os.sched_setaffinity(task, cpus)
    if not isinstance(prepared, str) and prepared.device.type == "cpu":
        import torch

        torch.set_num_threads(min(len(cpus), 8))


def _set_priority(*, idle: bool) -> None:
    """Every thread of this process to SCHED_IDLE, or back to the normal policy (refused without privilege once
    idle: it then stays idle, which costs only when something else wants the CPU)."""
    policy = os.SCHED_IDLE if idle else os.SCHED_OTHER
    for task in _threads():
        with contextlib.suppress(OSError):
            os.sched_setscheduler(task, policy, os.sched_param(0))


def _threads() -> list[int]:
    """This process's threads (policy and affinity are per thread on Linux)."""
    return [int(task.name) for task in Path("/proc/self/task").iterdir()]


class Prepared:
    """The trusted config's held-out set, tokenizer and rewards, and the models' loader."""

    def __init__(self, job: EvalJob) -> None:
        import torch

        from canary_action.config.load import parse_config
        from canary_action.evaluate.examples import heldout_set
        from canary_action.evaluate.models import Loader

        self.job = job
        self.trusted = parse_config(job.trusted_config, source="the trusted config").config
        threads = self.trusted.cpu_threads
        torch.set_num_threads(threads if isinstance(threads, int) else 1)
        torch.manual_seed(0)  # nothing here samples; a reward model's score head, if new, is drawn the same
        on_cuda = job.device == "cuda" or (job.device == "auto" and self.trusted.device != "cpu"
                                           and torch.cuda.is_available())  # fmt: skip
        self.device = torch.device("cuda" if on_cuda else "cpu")
        self.loader = Loader(self.device, Path(tempfile.mkdtemp(prefix="rlhf-canary-eval-")), {})
        setup = self.loader.setup(self.trusted)
        self.tokenizer = setup.tokenizer
        self.set = heldout_set(self.trusted, self.tokenizer)
        self.reward_functions: list[Callable[..., Any]] = []
        self.reward_scorers: list[Callable[[Sequence[str]], list[float]]] = []
        if self.set.metric == "reward":
            self._load_rewards()
        self._reference: dict[tuple[Any, ...], list[tuple[float, float]]] = {}
        for subject in job.subjects:  # loading is no computing: done now, beside the training
            config = parse_config(subject.config, source=f"the {subject.name} run's config").config
            if self._differs(subject.name, config) is None:
                self.loader.start(config)

    @classmethod
    def make(cls, job: EvalJob) -> Prepared:
        return cls(job)

    def _load_rewards(self) -> None:
        from canary_action.train.rewards import reward_functions

        config: Any = self.trusted
        self.reward_functions = reward_functions(
            getattr(config, "reward_funcs", []), max_new_tokens=config.max_new_tokens
        )
        if getattr(config, "reward_model", None) is not None:
            self.reward_scorers.append(self._reward_model(config.reward_model))

    def _reward_model(self, name: str) -> Callable[[Sequence[str]], list[float]]:
        import torch

        from canary_action.train.builtin import catalog, tokenizer

        loaded: Any = self.loader.setup(self.trusted).load_model(name, task="sequence-classification")
        model = loaded.to(self.device).eval()
        its_tokenizer: Any
        if catalog.split(name) is not None:
            its_tokenizer = tokenizer.build_tokenizer()
        else:
            from transformers import AutoTokenizer

            its_tokenizer = AutoTokenizer.from_pretrained(name)
        if its_tokenizer.pad_token is None:
            its_tokenizer.pad_token = its_tokenizer.eos_token

        @torch.no_grad()
        def score(texts: Sequence[str]) -> list[float]:
            batch = its_tokenizer(list(texts), return_tensors="pt", padding=True, truncation=True, max_length=1024)
            return [float(v) for v in model(**batch.to(self.device)).logits[:, 0]]

        return score

    def evaluate(self, subject: Subject) -> HeldoutEval:
        from canary_action.config.load import parse_config
        from canary_action.evaluate.models import SnapshotRefused, read_snapshot, trained
        from canary_action.files import folders_inside, read_inside

        config = parse_config(subject.config, source=f"the {subject.name} run's config").config
        common = {"metric": self.set.metric, "dataset": self.set.dataset, "num_examples": self.set.size,
                  "fingerprint": self.set.fingerprint}  # fmt: skip
        why = self._differs(subject.name, config)
        if why is not None:
            return HeldoutEval(status="skipped", reason="not_comparable", message=why, **common)
        run_dir = Path(subject.run_dir)
        names = [n for n in folders_inside(run_dir, [SNAPSHOT_DIR]) if _SNAPSHOT_NAME.fullmatch(n)]
        if not names:
            why = self._no_snapshot(run_dir, read_inside)
            return HeldoutEval(status="skipped", reason="no_snapshot", message=why, **common)
        began = time.monotonic()
        start = self.loader.start(config)
        points = [self._score(start, 0, start, config)]
        refused: list[str] = []
        for name in names:
            try:
                meta, tensors = read_snapshot(run_dir, name)
                if meta.step != int(_SNAPSHOT_NAME.fullmatch(name).group(1)):  # type: ignore[union-attr]
                    raise SnapshotRefused(f"snapshot {name} says it is of step {meta.step}")
                model = trained(start, meta, tensors)
            except SnapshotRefused as refusal:
                refused.append(str(refusal))
                continue
            points.append(self._score(model, meta.step, start, config))
            del model, tensors
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

    def _no_snapshot(self, run_dir: Path, read: Callable[..., bytes]) -> str:
        try:
            said = read(run_dir, [SNAPSHOT_DIR, REFUSAL_FILE], limit=4096).decode("utf-8", errors="replace").strip()
        except Exception:  # no reason written: the run ended before its first snapshot
            said = ""
        return f"no snapshot to evaluate: {said}" if said else "no snapshot to evaluate: the run ended before one"

    def _score(self, model: Any, step: int, start: Any, config: Any) -> HeldoutPoint:
        from canary_action.evaluate import scoring
        from canary_action.evaluate.models import start_key

        size, device, hset = self.trusted.heldout.batch_size, self.device, self.set
        if hset.metric == "next_token":
            values, accuracy = scoring.next_token(model, hset.sequences, batch_size=size, device=device)
            return HeldoutPoint(step=step, value=_mean(values), accuracy=accuracy, examples=values)
        if hset.metric == "preference":
            key = start_key(config)
            if key not in self._reference:
                self._reference[key] = scoring.answer_logps(start, hset.pairs, batch_size=size, device=device)
            policy = self._reference[key] if step == 0 else scoring.answer_logps(model, hset.pairs, batch_size=size,
                                                                                 device=device)  # fmt: skip
            margins, share = scoring.preference(policy, self._reference[key])
            return HeldoutPoint(step=step, value=_mean(margins), accuracy=share, examples=margins)
        completion_ids = scoring.generate(
            model, self.tokenizer, hset.prompts, max_new_tokens=getattr(self.trusted, "max_new_tokens", 64),
            temperature=getattr(self.trusted, "temperature", 1.0),
            batch_size=size, device=device,
        )  # fmt: skip
        texts = self.tokenizer.batch_decode(completion_ids, skip_special_tokens=True)
        values = scoring.rewards(
            self.reward_functions, hset.prompt_texts, texts, completion_ids, hset.columns, self.reward_scorers
        )
        return HeldoutPoint(step=step, value=_mean(values), examples=values)


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0
