"""Starting the evaluator beside a training, and reading what it found: light, no torch.

    evaluator = Evaluator.start(trusted_config, [("base", config, run_dir), ...], folder)
    ... train (the subjects' training processes save their snapshots) ...
    evaluations = evaluator.finish()      # {"base": HeldoutEval, ...}; never raises for the evaluator's failures

The evaluator is this interpreter in isolated mode (`-I`: no PYTHONPATH, no user site, no working directory on
the import path), in the working directory the trusted training runs in (relative data and model paths resolve
as they do there), with no token in its environment and no code tree but the trusted one (whose reward functions
the trusted config may name). Its job, results and log are files in `folder`, a folder of the caller's own,
removed once read unless an evaluation failed (then its log stays, and the evaluation names it); what loading
writes goes to a temporary folder removed when it ends, whatever ended it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from pydantic import ValidationError

from canary_action.config.schema import CommonConfig
from canary_action.evaluate.plan import EvalJob, EvalResults, Subject
from canary_action.evaluate.priority import set_policy
from canary_action.metrics.heldout import HeldoutEval

JOB_FILE: Final = "heldout-job.json"
RESULTS_FILE: Final = "heldout-results.json"
LOG_FILE: Final = "heldout.log"
#: Seconds the evaluation may take once told to go, before it is ended: a minute per subject beyond its import
#: and load (seconds for the tiny canaries, a minute or two for a 135M model on a CPU).
TIMEOUT_S: Final = 900.0
_LOG_TAIL_LINES: Final = 8


class Evaluator:
    def __init__(self, process: subprocess.Popen[bytes], folder: Path, names: list[str], workdir: Path) -> None:
        self.process = process
        self.folder = folder
        self.names = names
        self.workdir = workdir

    @classmethod
    def start(
        cls,
        trusted: CommonConfig,
        subjects: Sequence[tuple[str, CommonConfig, Path, bool]],
        folder: Path,
        *,
        trusted_tree: Path | None = None,
        python: str | None = None,
        cwd: Path | None = None,
    ) -> Evaluator:
        """Start the evaluator (it prepares at idle priority until `finish`). `subjects`: (name, config, run folder,
        trusted: False for a pull request's side). `python`: another interpreter with the canary and torch (a pair
        coordinator without the [train] extra passes the base side's). `cwd`: where the trusted training runs
        (default: here)."""
        from canary_action.train.launch.environment import CODE_TREE_ENV, scrubbed

        folder.mkdir(parents=True, exist_ok=True)
        folder = folder.resolve()
        workdir = tempfile.mkdtemp(prefix="rlhf-canary-eval-")
        job = EvalJob(
            trusted_config=trusted.model_dump(mode="json"),
            trusted_tree=str(trusted_tree) if trusted_tree else None,
            subjects=[
                Subject(name=n, config=c.model_dump(mode="json"), run_dir=str(d.resolve()), trusted=t)
                for n, c, d, t in subjects
            ],
            output=str(folder / RESULTS_FILE),
            scratch=workdir,
            cpus=sorted(os.sched_getaffinity(0)),
        )
        (folder / JOB_FILE).write_text(job.model_dump_json(indent=2), encoding="utf-8")
        (folder / RESULTS_FILE).unlink(missing_ok=True)
        env = {k: v for k, v in scrubbed(os.environ).items() if k != CODE_TREE_ENV}
        if trusted_tree is not None:
            env[CODE_TREE_ENV] = str(trusted_tree)
        command = [python or sys.executable, "-I", "-m", "canary_action.evaluate", "--job", str(folder / JOB_FILE)]
        with (folder / LOG_FILE).open("wb") as log:
            process = subprocess.Popen(
                command, stdin=subprocess.PIPE, stdout=log, stderr=log, cwd=cwd or Path.cwd(), env=env,
                start_new_session=True,  # its own process group: ended with whatever it started
            )  # fmt: skip
        return cls(process, folder, [subject[0] for subject in subjects], Path(workdir))

    def finish(self, timeout_s: float = TIMEOUT_S) -> dict[str, HeldoutEval]:
        """Tell it to go and wait for its results; whatever goes wrong is said in each subject's evaluation."""
        set_policy(self.process.pid, idle=False)  # at once: still preparing at idle priority, it could starve
        with contextlib.suppress(BrokenPipeError, OSError):
            assert self.process.stdin is not None
            self.process.stdin.write(b"go\n")
            self.process.stdin.close()
        try:
            code = self.process.wait(timeout=timeout_s)
            why = f"the evaluator exited with status {code}" if code else "the evaluator said nothing of it"
        except subprocess.TimeoutExpired:
            self._end()
            why = f"the evaluator did not finish within {timeout_s:.0f} s and was ended"
        shutil.rmtree(self.workdir, ignore_errors=True)
        try:  # written after each subject: what was done before a timeout or a crash is kept
            done = EvalResults.model_validate_json((self.folder / RESULTS_FILE).read_text(encoding="utf-8"))
        except (OSError, ValidationError):
            return self._failed(why)
        found = {name: done.evaluations.get(name) or self._failed(why)[name] for name in self.names}
        if all(e.status != "failed" for e in found.values()):  # its log is kept where it helps
            for name in (JOB_FILE, RESULTS_FILE, LOG_FILE):
                (self.folder / name).unlink(missing_ok=True)
        return found

    def cancel(self) -> None:
        """End it without evaluating (the training failed, or was interrupted), and what it left. It computes
        nothing before it is told to go, so it is ended at once, not asked."""
        self._end()
        with contextlib.suppress(OSError):
            assert self.process.stdin is not None
            self.process.stdin.close()
        shutil.rmtree(self.workdir, ignore_errors=True)
        for name in (JOB_FILE, RESULTS_FILE, LOG_FILE):
            (self.folder / name).unlink(missing_ok=True)

    def _end(self) -> None:
        """Kill it and whatever it started (its process group), and wait for it."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.kill()  # no-op once it has exited
        self.process.wait()

    def _failed(self, why: str) -> dict[str, HeldoutEval]:
        log = self.folder / LOG_FILE
        lines = log.read_text(encoding="utf-8", errors="replace").splitlines() if log.is_file() else []
        tail = " | ".join(line.strip() for line in lines[-_LOG_TAIL_LINES:] if line.strip())
        message = f"{why}{': ' + tail[-1500:] if tail else ''} (its log: {log})"
        return {name: HeldoutEval(status="failed", message=message) for name in self.names}
