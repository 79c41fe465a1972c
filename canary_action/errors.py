"""The one exception hierarchy. Library code raises these; only `cli.py` maps them to exit codes.

Every error carries what went wrong (the message), how to fix it, and where to read more, so that the
message a user sees in a CI log is enough to act on.
"""

from __future__ import annotations

from pathlib import Path

DOCS = "https://github.com/rlhf-canary/rlhf-canary#readme"


#: How to make a GPU visible to a job that sees none (a refused `device: cuda`, the action's `gpu` input).
GPU_RUNTIME_FIX = (
    "give the job the GPU: with the python action (in your own environment) run the job on the runner's host or "
    "in a job-level `container:` with `options: --gpus all`; the Docker action's container sees it only with the "
    "NVIDIA Container Toolkit as Docker's default runtime (nvidia-ctk runtime configure --runtime=docker "
    "--set-as-default); either way a torch build for the machine's CUDA driver, and no CUDA_VISIBLE_DEVICES that "
    "hides it (docs/runner-setup.md)"
)


class CanaryError(Exception):
    """Base class: an expected failure with a cause, a fix and a pointer to the docs."""

    title = "rlhf-canary failed"

    def __init__(self, message: str, *, fix: str = "", docs: str = DOCS) -> None:
        super().__init__(message)
        self.message = message
        self.fix = fix
        self.docs = docs
        self.annotated = False  # the action has shown it as an error annotation already (on the file it is about)

    def render(self) -> str:
        lines = [f"{self.title}: {self.message}"]
        if self.fix:
            lines.append(f"  fix: {self.fix}")
        if self.docs:
            lines.append(f"  see: {self.docs}")
        return "\n".join(lines)


class ConfigError(CanaryError):
    """The canary config (or a --set override) is invalid, or asks for what this machine cannot do."""

    title = "invalid canary config"

    def __init__(self, message: str, *, errors: list[str] | None = None, fix: str = "", docs: str = DOCS) -> None:
        super().__init__(message, fix=fix, docs=docs)
        self.errors = errors or []

    def render(self) -> str:
        head = f"{self.title}: {self.message}"
        body = "".join(f"\n  - {e}" for e in self.errors)
        tail = (f"\n  fix: {self.fix}" if self.fix else "") + (f"\n  see: {self.docs}" if self.docs else "")
        return head + body + tail


class ThresholdFileError(ConfigError):
    """A threshold file (--threshold-file, the action's `thresholds` input) is missing or invalid."""

    title = "invalid threshold file"


class ModelUnavailableError(ConfigError):
    """The model or data the config names is not in the Hugging Face cache and cannot be fetched (the Hub is
    unreachable, or offline mode is on): the config may be right, the machine cannot serve it."""

    title = "model or data unavailable"


class TemplateError(ConfigError):
    """A team's report templates (`--templates`, the action's `templates` input) cannot be used."""

    title = "unusable report template"


class UsageError(CanaryError):
    """The command line itself is wrong (a bad flag value, a missing file argument)."""

    title = "usage error"


class NoPairBaseError(UsageError):
    """A lockstep baseline cannot be made: the base commit cannot be checked out, or its tree lacks the config or
    refuses it. With `baseline: auto` the action falls back to artifact baselines and says so."""

    title = "no lockstep base"


class MissingExtraError(UsageError):
    """A command needs an optional part of the install (`canary run` the `[train]` extra) that is not there."""

    title = "missing install extra"


class UnsupportedStackError(UsageError):
    """The environment's training stack (torch, transformers, TRL, ...) is installed at a version outside the
    `[train]` extra's range: the canary runs in a team's own environment and never replaces it."""

    title = "unsupported training stack"


class MetricsFileError(CanaryError):
    """A metrics.json (current run or baseline) is missing, corrupt or of an unknown schema version."""

    title = "unreadable metrics file"


class ResultFileError(MetricsFileError):
    """A compare result (result.json) given to `canary report` is missing, corrupt or of another version."""

    title = "unreadable compare result"


class CaptureError(MetricsFileError):
    """A captured step (a run's captures/, maybe from an artifact: untrusted data) cannot be read or replayed."""

    title = "capture refused"


class HistoryError(MetricsFileError):
    """A history file (docs/history.md) cannot be read or written: missing, over its cap, or no line of it valid."""

    title = "history refused"


class ArtifactError(MetricsFileError):
    """A measured run's artifact (made by pull request code: untrusted data) was refused in report mode."""

    title = "artifact refused"


class ConfigChangedError(ArtifactError):
    """Report mode: the measured run's config differs from the default branch's in what decides how it is judged,
    and no maintainer accepted that for the commit."""

    title = "the pull request changes its canary config"


class IncomparableRunError(ConfigChangedError):
    """Report mode: the measured run is not comparable with the default branch's runs (its recorded data, model or
    hardware differs), and no maintainer accepted that for the commit."""

    title = "the pull request's run is not comparable with the default branch's"


class BaselineError(MetricsFileError):
    """The baseline cannot be used: missing, corrupt, of another schema version or another config."""

    title = "unusable baseline"
    reason = ""  # the few words a note gives when such a run, found in a folder, is left out instead


class NoBaselineError(BaselineError):
    """No baseline run was found (or none was usable). `canary compare` exits 2; the action, which looks
    for one itself, answers neutral with the way to create one."""

    title = "no baseline"


class TrainingError(CanaryError):
    """The canary training run crashed or could not start. What was measured is still written."""

    title = "canary training failed"

    def __init__(self, message: str, *, fix: str = "", docs: str = DOCS, metrics_path: Path | None = None) -> None:
        super().__init__(message, fix=fix, docs=docs)
        self.metrics_path = metrics_path
        """The metrics.json written before the error, when the run got that far: still compared and reported."""


class GitHubError(CanaryError):
    """GitHub could not be reached or refused a request."""

    title = "GitHub request failed"

    def __init__(self, message: str, *, fix: str = "", docs: str = DOCS, status: int | None = None) -> None:
        super().__init__(message, fix=fix, docs=docs)
        self.status = status
        """The HTTP status GitHub answered with; None when it never answered (outage, network)."""

    @property
    def forbidden(self) -> bool:
        """A refusal for want of a permission (a read-only token): the action degrades instead of failing."""
        return self.status in (403, 404)


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C (or a cancelled job's SIGTERM) ended a run after it wrote what it had measured.

    A KeyboardInterrupt, not a CanaryError: it passes every `except Exception`, and whatever handles interrupts
    (the action's cancelled check) still does. It carries the run directory, so that the CLI can say what was
    kept, and where.
    """

    #: What an interrupted run leaves, and what each holds (in the run directory, or a lockstep side's).
    KEPT: tuple[tuple[str, str], ...] = (
        ("metrics.json", "what was measured, with status failed (interrupted)"),
        ("steps.jsonl", "one row per finished step"),
        ("error.log", "the traceback: where it stopped"),
        ("pair.json", "the lockstep rounds"),
    )

    def __init__(self, run_dir: Path, cause: KeyboardInterrupt) -> None:
        super().__init__(*cause.args)
        self.run_dir = run_dir

    def kept(self) -> list[tuple[Path, str]]:
        """The files of KEPT that exist, in the run directory and its sides' (base/, head/)."""
        folders = [self.run_dir, *(self.run_dir / side for side in ("base", "head"))]
        return [(f / name, what) for f in folders for name, what in self.KEPT if (f / name).is_file()]


#: `canary` writes the error that ended it here (JSON) when this variable names a file: a parent that ran it as a
#: child process (the action's training, a lockstep side) raises the same error with its message and fix.
ERROR_FILE_ENV = "CANARY_ERROR_FILE"


def error_record(error: CanaryError) -> dict[str, object]:
    metrics_path = getattr(error, "metrics_path", None)
    return {
        "type": type(error).__name__,
        "message": error.message,
        "fix": error.fix,
        "errors": list(getattr(error, "errors", [])),
        "metrics_path": str(metrics_path) if metrics_path is not None else None,
    }


def from_record(record: dict[str, object]) -> CanaryError:
    """The error a child recorded, rebuilt as its own class (TrainingError for a class this module lacks)."""
    kinds = {kind.__name__: kind for kind in _subclasses(CanaryError)}
    message, fix = str(record.get("message", "")), str(record.get("fix", ""))
    kind = kinds.get(str(record.get("type")), TrainingError)
    if issubclass(kind, ConfigError):
        errors = record.get("errors")
        return kind(message, fix=fix, errors=[str(e) for e in errors] if isinstance(errors, list) else [])
    if issubclass(kind, TrainingError):
        path = record.get("metrics_path")
        return kind(message, fix=fix, metrics_path=Path(path) if isinstance(path, str) else None)
    try:
        return kind(message, fix=fix)
    except TypeError:  # a subclass with required arguments of its own
        return TrainingError(message, fix=fix)


def _subclasses(kind: type[CanaryError]) -> list[type[CanaryError]]:
    found = [kind]
    for sub in kind.__subclasses__():
        found += _subclasses(sub)
    return found
