"""The history record (docs/history.md): one line per trusted run of a config, kept on a branch of its own.

`history.jsonl` holds one JSON object per line: an `entry` (one run of the default branch: its commit, its
environment, its judged figures and verdict, the merged pull request's paired effects) or a `month` (the entries of
a month rolled into one when a config's entries passed the cap: store.py). Every line is validated on its own, as
untrusted data: the branch is the action's to write, but a file anyone can push to, or a folder of downloaded
artifacts, is still data from elsewhere. A line this version does not read — not JSON, over MAX_LINE_BYTES, a field
out of range, a string too long, NaN, another repository's — is left out with a note (read.py); the site renders
only what passed, escaped, and builds every link from validated fields (a commit's 40 hex digits, a number), never
from a URL the file holds.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Final, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from canary_action.compare.result import CheckStatus, Verdict


def _a_real_time(value: str) -> str:
    """2025-13-40T99:99:99Z has the shape of a time and is none: it would make an impossible month when rolled up."""
    try:
        datetime.strptime(value, "%Y-%m-%dT%H:%M:%SZ")
    except ValueError:
        raise ValueError("not a real UTC time") from None
    return value


HISTORY_SCHEMA_VERSION: Final = 1
HISTORY_FILE: Final = "history.jsonl"
#: A line of the file: an entry is about 1 KiB (16 paired effects and long environment strings: under 8 KiB); a
#: month holds its pull requests' effects, ~0.5 KiB each.
MAX_LINE_BYTES: Final = 512 * 1024
#: The whole file: 5 configs x KEEP_ENTRIES entries x ~1 KiB is ~5 MiB; months add little. Base64 in the Git Data
#: API's answer, it stays under the GitHub client's 32 MiB per response.
MAX_FILE_BYTES: Final = 16 * 2**20
#: Entries kept per config before the oldest months are rolled into one line each (store.py).
KEEP_ENTRIES: Final = 1000

Repository = Annotated[str, Field(pattern=r"^[A-Za-z0-9_.-]{1,100}/[A-Za-z0-9_.-]{1,100}$")]
ConfigName = Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")]
Commit = Annotated[str, Field(pattern=r"^[0-9a-f]{40}$")]
Date = Annotated[
    str, Field(pattern=r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z$"), AfterValidator(_a_real_time)
]
Month = Annotated[str, Field(pattern=r"^[0-9]{4}-(0[1-9]|1[0-2])$")]
CheckName = Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]{0,39}$")]
#: A measurement: finite, and within a range no canary's seconds, MiB or tokens/s leaves (a huge number is refused,
#: so that no point can flatten a chart's scale to a line).
Figure = Annotated[float, Field(ge=-1e12, le=1e12, allow_inf_nan=False)]
Text = Annotated[str, Field(max_length=200)]
Event = Literal["push", "schedule", "workflow_dispatch", "artifact"]


class Line(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class Environment(Line):
    """What the run ran on: a change between two entries is marked on the charts, so that drift is not blamed on
    code."""

    gpu: Text | None = None
    gpu_driver: Text | None = None
    cuda: Text | None = None
    torch: Text | None = None
    trl: Text | None = None
    runner: Text | None = Field(None, description="The CPU model, or the container image where one is recorded.")

    def changes(self, before: Environment) -> list[str]:
        """'torch 2.12.0 -> 2.13.0' for each field that differs from `before` (a field unknown on either side is no
        change: unknown is never taken as equal, and never as a change either)."""
        said = []
        for name in type(self).model_fields:
            old, new = getattr(before, name), getattr(self, name)
            if old is not None and new is not None and old != new:
                said.append(f"{name.replace('_', ' ')} {old} -> {new}")
        return said


class Effect(Line):
    """One check of a merged pull request's last lockstep pair, as its report judged it."""

    check: CheckName
    status: CheckStatus
    delta_pct: Figure
    low: Figure | None = Field(None, description="The paired interval of delta_pct (95 %), where it has one.")
    high: Figure | None = None


class PullRequest(Line):
    number: int | None = Field(None, ge=1, le=10**9, description="None: a pair read from an artifact without one.")
    head_commit: Commit | None = Field(None, description="The head its pair measured (None: trees not checkouts).")
    effects: list[Effect] = Field(default_factory=list, max_length=16)

    def effect(self, check: str) -> Effect | None:
        return next((e for e in self.effects if e.check == check), None)


class Bisect(Line):
    bad_commit: Commit
    summary: Text


class Figures(Line):
    """The judged summaries of one run (or a month's medians): None where the run did not measure it."""

    step_time_s: Figure | None = Field(None, description="Median steady step time.")
    step_time_noise_s: Figure | None = Field(None, description="Its median absolute deviation over the steps.")
    tokens_per_s: Figure | None = None
    memory_mib: Figure | None = Field(None, description="Peak reserved GPU memory, or peak host RSS on the CPU.")
    gpu_time_s: Figure | None = Field(None, description="Median GPU busy time per step (CUDA runs timed on the GPU).")
    heldout: Figure | None = Field(None, description="The held-out evaluation's figure at the run's end.")
    tail_loss: Figure | None = Field(None, description="Mean finite loss over the last 10 % of steps.")


class _OfConfig(Line):
    """What every line says first: its version, and whose history it is."""

    schema_version: Literal[1] = HISTORY_SCHEMA_VERSION
    repository: Repository
    config: ConfigName


class Entry(_OfConfig):
    kind: Literal["entry"] = "entry"
    commit: Commit
    date: Date = Field(description="When the run started, UTC.")
    event: Event
    run_id: int | None = Field(None, ge=1, le=2**53, description="The workflow run's id (its link).")
    verdict: Verdict
    failed: list[CheckName] = Field(default_factory=list, max_length=32, description="The checks that failed.")
    figures: Figures
    memory_device: Literal["gpu", "host"] | None = None
    heldout_label: Literal["held-out loss", "held-out preference margin", "held-out reward"] | None = None
    env: Environment
    pull_request: PullRequest | None = Field(None, description="The merged pull request this commit came from.")
    bisect: Bisect | None = None


class MonthSummary(_OfConfig):
    """A month's entries of one config rolled into one line: medians, counts and the pull requests' ledger."""

    kind: Literal["month"] = "month"
    month: Month
    num_runs: int = Field(ge=1, le=10**6)
    num_regressions: int = Field(ge=0, le=10**6)
    last_commit: Commit
    figures: Figures
    pull_requests: list[PullRequest] = Field(default_factory=list, max_length=500)


HistoryLine = Annotated[Entry | MonthSummary, Field(discriminator="kind")]
