"""`canary bisect`'s training: a lockstep pair of (good commit, candidate) per step of the search, each commit in
a git worktree of its own, judged as `canary pair` judges (docs/bisect.md)."""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from canary_action.bisect.history import describe as describe_commit
from canary_action.bisect.history import first_parent_range, repository_root, resolve, worktree
from canary_action.bisect.render import effect_text
from canary_action.bisect.result import BisectResult, CommitRef, EffectRecord, Finding, PairStep, Status
from canary_action.bisect.search import Effect, Search, default_budget
from canary_action.compare.confirm import unconfirmed
from canary_action.config.thresholds import Tier
from canary_action.errors import CanaryError, ConfigError, TrainingError, UsageError
from canary_action.metrics.io import counted

if TYPE_CHECKING:
    from canary_action.compare.result import Check, CompareResult

JUDGED = ("pass", "warn", "fail")


@dataclass(frozen=True)
class BisectPlan:
    """What every pair of the bisect shares: `canary pair`'s options."""

    config: Path
    overrides: Sequence[str] = ()
    setup: str | None = None
    chunk_steps: int = 2
    cpus: Sequence[int] | None = None
    tier: Tier = "default"
    threshold_file: Path | None = None
    check: str | None = None
    max_pairs: int | None = None


@dataclass
class _Bisect:
    """One bisect's state: the commits, the pairs run so far (each as it will be reported, its call filled in
    from the search) and the search."""

    plan: BisectPlan
    refs: list[CommitRef]
    out: Path
    budget: int
    started: float = field(default_factory=time.perf_counter)
    steps: list[PairStep] = field(default_factory=list)
    search: Search | None = None
    check: Check | None = None

    def finish(self, status: Status | None = None, summary: str = "") -> BisectResult:
        result = _result(self, status, summary)
        self.out.mkdir(parents=True, exist_ok=True)
        (self.out / "bisect.json").write_text(result.model_dump_json(indent=2) + "\n", encoding="utf-8")
        return result


def run_bisect(
    repo: Path, good: str, bad: str, out: Path, plan: BisectPlan, *, say: Callable[[str], None] = print
) -> BisectResult:
    """Confirm the regression with one pair (good, bad), then search the first-parent commits between them.
    Writes OUT/bisect.json (also when interrupted: what was measured is kept) and OUT/pairs/<pair_id>/."""
    root = repository_root(repo)
    good_sha, bad_sha = resolve(root, good, "--good"), resolve(root, bad, "--bad")
    commits = first_parent_range(root, good_sha, bad_sha)
    first = describe_commit(root, good_sha)
    refs = [CommitRef(sha=first.sha, subject=first.subject, index=0)]
    refs += [CommitRef(sha=c.sha, subject=c.subject, index=i) for i, c in enumerate(commits, start=1)]
    n = len(commits)
    budget = default_budget(n) if plan.max_pairs is None else max(plan.max_pairs - 1, 0)
    state = _Bisect(plan, refs, out, budget)
    with (
        tempfile.TemporaryDirectory(prefix="canary-bisect-") as scratch,
        worktree(root, good_sha, Path(scratch) / "good") as good_tree,
    ):
        _check_good(good_tree, plan, good_sha)
        measure = _measurer(state, root, good_tree, Path(scratch), say)
        try:
            confirmed = measure(n, confirm=True)
            if isinstance(confirmed, str):
                raise TrainingError(
                    f"the pair of the bad commit {bad_sha[:10]} against the good one did not run: {confirmed}",
                    fix="its log above names the side that failed; a bad commit that crashes is a crash, not a "
                    "slowdown: `canary run` it there",
                )
            check = state.check = _followed(confirmed, plan.check)
            if check is None:
                return state.finish("not-confirmed", _not_confirmed(confirmed, plan.check))
            total = _effect(check)
            assert total is not None  # a failed check has its change
            say(f"confirmed: {check.name} {total.text}; searching the {counted(n - 1, 'commit')} in between")
            state.search = Search(n, lambda k: _effect_at(measure(k), check), budget)
            state.search.run(total)
        except KeyboardInterrupt:
            state.finish("interrupted")
            raise
        except CanaryError as error:  # the good commit stopped training: what the pairs measured is kept
            state.finish("failed", f"stopped: {error.message}")
            raise
    return state.finish()


def _check_good(tree: Path, plan: BisectPlan, sha: str) -> None:
    """The good commit's config must load: every pair trains it (a commit after it may lack it: skipped)."""
    from canary_action.config.load import load_config

    if not (tree / plan.config).is_file():
        raise UsageError(
            f"the good commit {sha[:10]} has no {plan.config}",
            fix="CONFIG is a path inside each commit's tree: pass a good commit that has it",
        )
    try:
        load_config(tree / plan.config, plan.overrides)
    except ConfigError as error:
        message = f"at the good commit {sha[:10]}: {error.message}"
        raise ConfigError(message, errors=error.errors, fix=error.fix) from None


def _measurer(
    state: _Bisect, root: Path, good_tree: Path, scratch: Path, say: Callable[[str], None]
) -> Callable[..., CompareResult | str]:
    """Commit k against the good commit, in a lockstep pair: its comparison, or why it could not be measured."""
    from canary_action.compare.confirm import CONFIRM_CAP_S
    from canary_action.compare.pair_judge import judge_pair
    from canary_action.train.launch.confirm_pair import run_confirmed

    def measure(index: int, *, confirm: bool = False) -> CompareResult | str:
        ref, plan = state.refs[index], state.plan
        say(f"pair {len(state.steps) + 1}: {ref.sha[:10]} {ref.subject!r} against the good commit")
        started = time.perf_counter()
        pair_dir: Path | None = None
        try:
            with worktree(root, ref.sha, scratch / ref.sha[:12]) as tree:
                # The confirming pair is confirmed before it starts a search (compare/confirm.py); the search's
                # own pairs are judged as they come (confirmation off), each one step of a search that re-measures
                # where a step is unclear.
                outcome = run_confirmed(
                    good_tree, tree, plan.config, output_dir=state.out / "pairs", overrides=plan.overrides,
                    chunk_steps=plan.chunk_steps, cpus=plan.cpus, setup=plan.setup,
                    cap_s=CONFIRM_CAP_S if confirm else 0, tier=plan.tier, threshold_file=plan.threshold_file,
                )  # fmt: skip
        except CanaryError as error:  # its config, its setup: this commit cannot be measured
            judged: CompareResult | str = _why(error)
        else:
            pair_dir = outcome.pair_dir
            if not outcome.base.exists():  # no fault of the candidate, and no pair can be judged without it
                raise TrainingError(
                    f"the good commit did not train in pair {pair_dir}: {' '.join(outcome.notes)}",
                    fix="read the base side's log in that pair's folder; a good commit must train",
                )
            if not outcome.head.exists() or outcome.error is not None:
                # refused its config, crashed or hung: measured up to there, not comparable as a whole
                judged = _why(outcome.error or TrainingError("it wrote no metrics.json"))
            else:
                judged = judge_pair(outcome, tier=plan.tier, threshold_file=plan.threshold_file)
        verdict = None if isinstance(judged, str) else judged.verdict
        why = judged if isinstance(judged, str) else ""
        wall_s = round(time.perf_counter() - started, 1)
        state.steps.append(PairStep(commit=ref, call="unclear", verdict=verdict, why=why, wall_s=wall_s,
                                    pair_dir=str(pair_dir) if pair_dir else None))  # fmt: skip
        say(f"  {why or verdict} ({wall_s:.0f} s)")
        return judged

    return measure


def _why(error: CanaryError) -> str:
    """Why a commit could not be measured, in a line: the error and, for a config, its first problems."""
    problems = error.errors[:3] if isinstance(error, ConfigError) else []
    return f"{error.title}: {error.message}" + "".join(f"; {p}" for p in problems)


def _followed(result: CompareResult, name: str | None) -> Check | None:
    """The check the search follows: `name`, or the first the confirming pair failed — else the first whose change
    is clear at a level the gate only warned of (the user knows it regressed), but for one a second pair did not
    confirm — that has a change in % with an interval."""
    if name is not None and name not in {c.name for c in result.checks}:
        raise UsageError(
            f"--check {name!r} is not a check of this comparison",
            fix=f"pass one of {', '.join(c.name for c in result.checks)}, or leave --check out",
        )
    followable = [c for c in result.checks if name in (None, c.name) and _effect(c) is not None]
    failed = [c for c in followable if c.status == "fail"]
    # A failure its second pair did not find again (a slow process) is no regression to search for.
    warned = [c for c in followable if c.status == "warn" and _clear(c) and not unconfirmed(c)]
    return next(iter(failed + warned), None)


def _clear(check: Check) -> bool:
    return check.interval is not None and (check.interval.low > 0 or check.interval.high < 0)


def _not_confirmed(result: CompareResult, name: str | None) -> str:
    what = f"{name} does not fail" if name else "no check with a change in % and its interval fails"
    return (
        f"not confirmed: in a pair of the bad commit against the good one, {what} ({result.verdict}: {result.reason})"
    )


def _effect(check: Check) -> Effect | None:
    """The check's change with its interval; None when it was not judged or has no interval (a memory or learning
    check: a point without its noise cannot be placed between two levels)."""
    if check.status not in JUDGED or check.delta_pct is None or check.interval is None:
        return None
    return Effect(check.delta_pct, check.interval.low, check.interval.high)


def _effect_at(judged: CompareResult | str, followed: Check) -> Effect | str:
    if isinstance(judged, str):
        return judged
    check = next((c for c in judged.checks if c.name == followed.name), None)
    effect = _effect(check) if check else None
    if effect is None:
        return f"{followed.name} was not judged with an interval" + (f": {check.message}" if check else "")
    return effect


def _record(effect: Effect) -> EffectRecord:
    return EffectRecord(pct=round(effect.pct, 2), low=round(effect.low, 2), high=round(effect.high, 2))


def _result(state: _Bisect, status: Status | None, summary: str) -> BisectResult:
    steps, search, check, refs = list(state.steps), state.search, state.check, state.refs
    if steps:
        total = _effect(check) if check else None
        steps[0] = steps[0].model_copy(update={"call": "confirm", "effect": _record(total) if total else None})
    for i, step in enumerate(search.steps if search else [], start=1):
        if i < len(steps):
            effect = _record(step.effect) if step.effect else None
            why = step.why or steps[i].why
            steps[i] = steps[i].model_copy(update={"call": step.call, "effect": effect, "why": why})
    findings = [
        Finding(commits=refs[f.low + 1 : f.high + 1], clear=f.clear, before=_record(f.before), after=_record(f.after),
                why=f.why)
        for f in (search.findings if search else [])
    ]  # fmt: skip
    if status is None:
        status = "not-clear" if not all(f.clear for f in findings) else "found" if len(findings) == 1 else "several"
    return BisectResult(
        config=str(state.plan.config), check=check.name if check else None, unit="%", good=refs[0], bad=refs[-1],
        commits=len(refs) - 1, status=status, summary=summary or _summary(status, findings, check), steps=steps,
        findings=findings, pairs=len(steps), max_pairs=1 + (search.budget if search else state.budget),
        wall_s=round(time.perf_counter() - state.started, 1),
    )  # fmt: skip


def _summary(status: Status, findings: list[Finding], check: Check | None) -> str:
    if status == "interrupted":
        return f"interrupted after the pairs below; nothing named{' yet' if findings else ''}"
    name = check.name if check else "the check"
    parts = []
    for f in findings:
        if f.clear:
            c = f.commits[0]
            parts.append(
                f"{c.sha[:10]} {c.subject!r} changed {name} from {effect_text(f.before)} to {effect_text(f.after)}"
            )
        else:
            span = f"{f.commits[0].sha[:10]}..{f.commits[-1].sha[:10]}" if len(f.commits) > 1 else f.commits[0].sha[:10]
            parts.append(f"a change of {name} in {counted(len(f.commits), 'commit')} {span}, not narrowed: {f.why}")
    lead = {"found": "", "several": f"{len(findings)} changes: ", "not-clear": "not narrowed to one commit each: "}
    return lead.get(status, "") + "; ".join(parts)
