"""bisect.json: what `canary bisect` found, the pairs it ran and why it stopped. Closed like result.json: a field
this version does not know is an error; a new field means a new bisect_schema_version."""

from __future__ import annotations

from typing import Final, Literal

from pydantic import BaseModel, ConfigDict, Field

BISECT_SCHEMA_VERSION: Final = 1

Status = Literal["found", "several", "not-clear", "not-confirmed", "interrupted", "failed"]
StepCall = Literal["confirm", "before", "after", "between", "unclear", "skipped"]

CALL_WORDS: Final[dict[str, str]] = {
    "confirm": "the bad commit against the good one",
    "before": "like the good commit: the change comes after it",
    "after": "like the bad commit: the change is in it or before it",
    "between": "in between: more than one change in the range",
    "unclear": "not clear",
    "skipped": "skipped: could not be measured",
}


class Record(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class CommitRef(Record):
    sha: str
    subject: str
    index: int = Field(description="0 the good commit, n the bad one; first-parent order.")


class EffectRecord(Record):
    """The check's change against the good commit, in percent, with its confidence interval."""

    pct: float
    low: float
    high: float


class PairStep(Record):
    commit: CommitRef
    call: StepCall
    effect: EffectRecord | None = None
    verdict: str | None = Field(None, description="The pair's own verdict (pass, regression, neutral...).")
    why: str = Field("", description="For a skipped commit: what failed.")
    pair_dir: str | None = None
    wall_s: float


class Finding(Record):
    commits: list[CommitRef] = Field(description="The commits that hold one change, oldest first: one when named.")
    clear: bool = Field(description="Narrowed to one commit through clear calls, the levels either side apart.")
    before: EffectRecord = Field(description="The effect at the commit before the range (0 at the good commit).")
    after: EffectRecord = Field(description="The effect at the range's last commit.")
    why: str = Field("", description="When not clear: where the search stopped.")


class BisectResult(Record):
    bisect_schema_version: Literal[1] = BISECT_SCHEMA_VERSION
    config: str
    check: str | None = Field(description="The check followed: the first that the confirming pair failed.")
    unit: str = ""
    good: CommitRef
    bad: CommitRef
    commits: int = Field(description="Commits after the good one up to the bad one (first parents).")
    status: Status
    summary: str = Field(description="One line: what was found.")
    steps: list[PairStep] = Field(description="Every pair, in the order run; the first confirms the regression.")
    findings: list[Finding]
    pairs: int
    max_pairs: int = Field(description="Pairs allowed for one regression; each further one found adds more.")
    wall_s: float
