"""`canary compare` without the CLI: files in, CompareResult out. Also what the action calls."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Collection, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Final

from pydantic import ValidationError

from canary_action.compare.baselines import BaselineSet, load_baselines, load_current
from canary_action.compare.comparability import LEARNING_FIELDS, PERF_FIELDS
from canary_action.compare.confirm import CONFIRMATION_DIR, Confirmation
from canary_action.compare.result import CompareResult
from canary_action.compare.runs import RunData
from canary_action.compare.verdict import compare
from canary_action.config.load import load_threshold_file
from canary_action.config.thresholds import ThresholdFile, Tier, base_tier, resolve
from canary_action.errors import CanaryError, MetricsFileError, NoBaselineError, UsageError
from canary_action.metrics.io import METRICS_FILE, clip_text
from canary_action.metrics.pair import PairRecord

ALLOWABLE = sorted({*PERF_FIELDS, *LEARNING_FIELDS})
_COMPARE_TIME: Final = "the compare-time tier: --threshold-tier, or the action's `tier` input"


def run_compare(
    current_path: Path,
    baseline_paths: Sequence[Path],
    *,
    tier: Tier = "default",
    threshold_file: Path | None = None,
    allowed: Collection[str] = (),
    notes: Sequence[str] = (),
    missing_ok: bool = False,
    trusted_block: tuple[str, ThresholdFile | None] | None = None,
    trusted_pair: bool = True,
    numerics_accepted: bool = False,
    confirmations: bool = True,
) -> CompareResult:
    """Load, merge thresholds (tier <- file <- the run's inline block, each base_tier replacing the tier before
    it, and said in the notes when it replaced one that was asked for), compare. Raises CanaryError subclasses.

    `missing_ok` (the action, which searched for baselines itself): no usable baseline is a neutral result
    that says why, instead of NoBaselineError. `notes` go into the result ahead of the loader's.
    `trusted_block` (report mode: (where it is from, the default branch's config's block)): the inline layer is
    that block, not the measured run's — a pull request's config must not loosen the limits it is judged by.
    `trusted_pair` False (report mode): a lockstep pair's base side is its head's partner only, not a baseline.
    `numerics_accepted`: a maintainer accepted the pair's change of the training numerics (fail_on_numerics_change).
    A pair whose record names a confirming pair is judged with it (compare/confirm.py); `confirmations` False judges
    the pair alone (the confirming pair itself, and the check that decides whether one is needed).
    """
    _check_allowed(allowed)
    members = pair_members(current_path)
    confirmation = None
    if members is not None and confirmations:
        confirmation = _confirmation(
            members[2], members[0].parent.parent, lambda second: run_compare(
                second, baseline_paths, tier=tier, threshold_file=threshold_file, allowed=allowed, missing_ok=True,
                trusted_block=trusted_block, trusted_pair=trusted_pair, numerics_accepted=numerics_accepted,
                confirmations=False,
            ),
        )  # fmt: skip
    code = None
    if members is not None:  # a lockstep pair: its head side is judged, its base side first among the baselines
        current_path, base_side, record = members
        baseline_paths = [base_side, *baseline_paths]
        code = record.code
    elif current_path.is_dir():  # the run directory `canary run` printed
        if not (current_path / METRICS_FILE).is_file():
            raise UsageError(
                f"{current_path} is a folder without a {METRICS_FILE}: the current run is one run",
                fix=f"pass the run directory `canary run` printed (runs/<run_id>), or its {METRICS_FILE}",
            )
        current_path = current_path / METRICS_FILE
    if not baseline_paths and not missing_ok:
        raise UsageError(
            f"no baseline given for {current_path}",
            fix="pass baseline metrics.json files or directories after it, or a lockstep pair's directory alone",
        )
    current = load_current(current_path)
    try:
        history = load_baselines(baseline_paths, current)
    except NoBaselineError as none:
        if not missing_ok:
            raise
        history = BaselineSet(runs=[], excluded=[], notes=[none.message] if baseline_paths else [])
    if members is not None and members[2].heldout is not None:
        current, history = with_pair_heldout(current, history, members[2])
    file = load_threshold_file(threshold_file) if threshold_file is not None else None
    inline, inline_name = _inline(current), f"the thresholds block of config {current.config_name}"
    if trusted_block is not None:
        inline_name, trusted = trusted_block
        if inline != trusted:
            notes = [*notes, f"the measured config's thresholds block is not used: judged by {inline_name}"]
        inline = trusted
    layers = [(f"file {threshold_file}", file), (inline_name, inline)]
    used = base_tier(tier, file, inline)
    sources = [f"tier {used}", *(name for name, layer in layers if layer is not None)]
    all_notes = [
        *notes,
        *_replaced_tiers(tier, layers),
        *history.notes,
        *(f"excluded baseline {why}" for why in history.excluded),
    ]
    return compare(
        current,
        history.runs,
        resolve(tier, file, inline),
        tier=used,
        threshold_sources=sources,
        allowed=allowed,
        notes=all_notes,
        code=code,
        trusted_pair=trusted_pair,
        numerics_accepted=numerics_accepted,
        confirmation=confirmation,
    )


def _confirmation(record: PairRecord, folder: Path, judge: Callable[[Path], CompareResult]) -> Confirmation | None:
    """The pair's confirming pair, judged; None for a record older than confirmation (version < 5). A pair that
    failed without one says why (the record's `not_confirmed`, or that the limits it ran with passed it). A
    confirming pair that is named but missing, unreadable or of other trees confirms nothing: the failure stands."""
    if record.confirmation is None:
        if record.not_confirmed:
            return Confirmation(None, "", record.not_confirmed)
        if record.pair_record_version < 5:
            return None
        return Confirmation(None, "", "none was run: the pair passed the limits it was run with")
    where = f"{CONFIRMATION_DIR}/{record.confirmation}"
    second = folder / CONFIRMATION_DIR / record.confirmation
    try:
        members = pair_members(second)
        if members is not None and members[2].code == record.code:
            return Confirmation(judge(second), where)
        why = f"{where} holds no lockstep pair" if members is None else f"{where} is a pair of other trees"
    except CanaryError as e:
        why = f"the confirming pair {where} cannot be judged: {e.message}"
    return Confirmation(None, where, why)


def _replaced_tiers(tier: Tier, layers: Sequence[tuple[str, ThresholdFile | None]]) -> list[str]:
    """Say when a layer's base_tier replaced a tier that was asked for (the flag's `default` is no choice)."""
    said: list[str] = []
    chosen, by = tier, _COMPARE_TIME
    for name, layer in layers:
        if layer is None or layer.base_tier is None:
            continue
        asked = by != _COMPARE_TIME or chosen != "default"
        if asked and layer.base_tier != chosen:
            said.append(
                f"thresholds start from tier {layer.base_tier}, the base_tier of {name}, not tier {chosen} ({by})"
            )
        chosen, by = layer.base_tier, f"the base_tier of {name}"
    return said


def pair_members(path: Path) -> tuple[Path, Path, PairRecord] | None:
    """(head, base) metrics.json of a lockstep pair and its record, given its directory or its pair.json; None
    otherwise."""
    record_path = path / "pair.json" if path.is_dir() else path
    if record_path.name != "pair.json" or not record_path.is_file():
        return None
    try:
        record = PairRecord.model_validate_json(record_path.read_text(encoding="utf-8"))
    except (ValidationError, OSError, UnicodeDecodeError) as e:
        raise MetricsFileError(
            f"{record_path} is not a lockstep pair record: {clip_text(str(e), 300)}",
            fix="pass the directory `canary pair` wrote, or the two sides' metrics.json (head first)",
        ) from e
    folder = record_path.parent  # the sides' folders are fixed names: a record cannot point elsewhere
    return folder / "head" / "metrics.json", folder / "base" / "metrics.json", record


def with_pair_heldout(current: RunData, history: BaselineSet, record: PairRecord) -> tuple[RunData, BaselineSet]:
    """The pair's held-out evaluations (pair.json) on its two sides: the head is the current run, the base side the
    baseline of the same pair."""
    assert record.heldout is not None
    evaluations = record.heldout
    current = replace(current, heldout=evaluations.get("head"))
    runs = [
        replace(run, heldout=evaluations.get("base"))
        if run.metrics is not None and run.metrics.pair is not None and run.metrics.pair.pair_id == record.pair_id
        and run.metrics.pair.side == "base"
        else run
        for run in history.runs
    ]  # fmt: skip
    return current, replace(history, runs=runs)


def _inline(current: RunData) -> ThresholdFile | None:
    block = current.config.get("thresholds")
    if block is None:
        return None
    try:
        return ThresholdFile.model_validate(block)
    except ValidationError as e:
        raise MetricsFileError(
            f"{current.source}: its config's thresholds block is invalid: {e.errors()[0]['msg']}",
            fix="the file was edited after the run; rerun the canary or fix the block",
        ) from e


def _check_allowed(allowed: Collection[str]) -> None:
    for name in allowed:
        if name not in ALLOWABLE:
            close = difflib.get_close_matches(name, ALLOWABLE, n=1)
            hint = f" — did you mean `{close[0]}`?" if close else ""
            raise UsageError(
                f"--allow-change {name!r} is not a comparability field{hint}",
                fix=f"use one of: {', '.join(ALLOWABLE)}",
            )
