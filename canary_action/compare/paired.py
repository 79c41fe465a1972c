"""Paired statistics for a lockstep pair: the head side (the PR's code) against the base side, round by round.

The two sides took turns on one machine (train/launch/pair.py): in round r each trained the same chunk of
steps (the same batches, the same seed), one right after the other. Whatever drifted on the machine — load,
clocks, neighbours — moved both sides' chunk of round r alike, so the unit of comparison is the round: each
side's chunk statistic (the median of its steady steps in the round; tokens/s and shares from the round's sums),
the log ratio head/base per round, and the effect is their trimmed mean (TRIM), with an interval from their
spread.

Rounds do not remove everything. Each process has a level of its own (memory layout, allocation, caches): two
identical sides differ by more than their rounds' spread says. That process-level spread (PROCESS_SD, fitted
from A/A pairs by benchmarks/lockstep.py) is added to the interval's variance, so that the false-alarm rate
holds across pairs, not only within one. The warm-up cut is the comparison's common one (window.py): the same
steps of both sides are left out.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

from canary_action.compare.runs import RunData
from canary_action.compare.stats import LEVEL, Effect, per_step_log_sd, t_quantile
from canary_action.metrics import schema

#: SD of the log level of one process beyond what its rounds show, by device kind: the process-to-process
#: part of an A/A pair's difference. cpu: fitted over 63 real A/A pairs of three canaries (a team's SFT trainer, a
#: team's DPO trainer with a reference model, GRPO with a team's reward) at three times of one day on a shared
#: 2-core machine, quiet and beside a bursty hog, their rounds timed less the wait for a CPU
#: (`benchmarks/lockstep.py families`; docs/benchmarks.md, "Canary families"): 1.04 % pooled (GRPO 1.49 %, DPO
#: 1.09 %, SFT 0 %: its noisier rounds already explain its A/A spread), rounded to 1 %. At the 0.5 % fitted before
#: (two canaries), one GRPO A/A pair of the 63 failed, and its confirming pair agreed. cuda: 1 %, an assumption
#: until GPU pairs are measured (one H200 A/A pair: -0.3 % [-2.5, +2.0]).
PROCESS_SD: Final[dict[str, float]] = {"cpu": 0.01, "cuda": 0.01}
MIN_ROUNDS: Final = 5
#: Share trimmed from each end of the rounds' log ratios: a garbage collection or a neighbour's burst lands in
#: one side's chunk of a round and makes that round's ratio an outlier (measured over 18 real A/A pairs: a median
#: SD of 11 % per round, a robust SD of 2.6 %). Yuen's trimmed mean keeps the interval honest and much narrower.
TRIM: Final = 0.2

#: A round in which the base side's CPU time per wall second fell under this share of its median over the rounds:
#: the side was stopped (SIGSTOP) or starved of CPU (another process computing on its CPUs) during its turn. The
#: round is left out: its ratio would credit the head side with the base side's lost time. CPU sides only: on a
#: GPU the host's CPU time follows how the side waits for its kernels, not whether it ran.
STALL_SHARE: Final = 0.5
#: More stalled rounds than this share of the base side's: the pair is not judged (paired checks skipped).
MAX_STALLED: Final = 0.25

#: The head side waiting for a CPU more than the base side by this many points of step time, clearly: its own
#: code may be contending with itself (more threads than CPUs), so the pair is judged on wall time.
WAIT_GAP_PP: Final = 1.0

#: The slowdown a pair's step-time check should fail 4 times in 5 (%): the change the gate promises to see. A pair
#: too short for it says how much longer its canary would have to be (`steps_to_resolve`).
RESOLVE_PCT: Final = 5.0
#: The one-sided normal quantile of 0.8: a change this many SDs over a limit lands over it 4 times in 5.
_RESOLVE_Z: Final = 0.8416

RoundFigure = Callable[[RunData, Sequence[int]], float | None]


@dataclass(frozen=True)
class PairedPoints:
    """A share's paired difference in percentage points (head - base), with its interval."""

    delta_pp: float
    low_pp: float
    high_pp: float
    base: float
    current: float
    rounds: int
    level: float
    """The confidence level of [low_pp, high_pp]."""


def partner(current: RunData, baselines: Sequence[RunData]) -> RunData | None:
    """The base side of the current run's lockstep pair among the baselines, or None."""
    own = current.metrics.pair if current.metrics is not None else None
    if own is None or own.side != "head":
        return None
    for run in baselines:
        other = run.metrics.pair if run.metrics is not None else None
        if other is not None and other.pair_id == own.pair_id and other.side == "base":
            return run
    return None


def process_sd(run: RunData) -> float:
    return PROCESS_SD.get(run.device_kind or "cpu", PROCESS_SD["cpu"])


def rounds(run: RunData) -> dict[int, list[int]]:
    """Round -> the run's steady rows trained in it (after the warm-up cut, outside the profiler window)."""
    series = run.metrics.series if run.metrics is not None else {}
    column = series.get(schema.PAIR_ROUND)
    if column is None or not run.steady_rows:
        return {}
    table: dict[int, list[int]] = {}
    for row in run.steady_rows:
        value = column[row]
        if value is not None and value >= 0:
            table.setdefault(int(value), []).append(row)
    return table


def common_rounds(current: RunData, base: RunData) -> list[tuple[list[int], list[int]]]:
    """(current rows, base rows) of every round both sides trained steady steps in, in round order, but those in
    which the base side was stalled (`stalled_rounds`)."""
    mine, theirs = rounds(current), rounds(base)
    stalled = stalled_rounds(current, base)
    return [(mine[r], theirs[r]) for r in sorted(mine.keys() & theirs.keys()) if r not in stalled]


def stalled_rounds(current: RunData, base: RunData) -> set[int]:
    """The rounds in which the base side, training on the CPU, got less than STALL_SHARE of its usual CPU time per
    wall second (the column perf/cpu_s; none without it). Usual: the larger of its own median over the rounds and
    the head side's — the same config on the same CPUs — so that a base side stalled in most rounds, whose median
    is the stalled figure, is still seen."""
    if base.device_kind != "cpu":
        return set()
    ratios = cpu_ratios(base)
    if len(ratios) < MIN_ROUNDS:
        return set()
    own = cpu_ratios(current) if current.device_kind == "cpu" else {}
    usual = max(statistics.median(ratios.values()), statistics.median(own.values()) if own else 0.0)
    return {index for index, ratio in ratios.items() if ratio < STALL_SHARE * usual}


def cpu_ratios(run: RunData) -> dict[int, float]:
    """Round -> the run's CPU time per wall second over its steady steps in the round."""
    cpu = _column(run, schema.CPU_S)
    ratios: dict[int, float] = {}
    for index, rows in rounds(run).items():
        timed = [(c, t) for r in rows if (c := cpu[r]) is not None and (t := run.step_times[r]) is not None]
        wall = sum(t for _, t in timed)
        if timed and wall > 0:
            ratios[index] = sum(c for c, _ in timed) / wall
    return ratios


def stall_report(current: RunData, base: RunData) -> tuple[str | None, bool]:
    """(a note naming the base side's stalled rounds, or None; whether there were too many to judge the pair)."""
    stalled, total = stalled_rounds(current, base), len(rounds(base))
    if not stalled:
        return None, False
    too_many = len(stalled) > MAX_STALLED * total
    said = (
        f"lockstep: the base side was stopped or starved in {len(stalled)} of {total} rounds (its CPU time per wall "
        f"second under {STALL_SHARE:.0%} of its median: rounds {_listed(sorted(stalled))}); "
    )
    said += (
        f"more than {MAX_STALLED:.0%} of them, so the pair is not judged"
        if too_many
        else "those rounds are left out of the paired checks"
    )
    return said, too_many


def _listed(values: Sequence[int], most: int = 12) -> str:
    shown = ", ".join(str(v) for v in values[:most])
    return shown + (f" and {len(values) - most} more" if len(values) > most else "")


def paired_effect(current: RunData, base: RunData, figure: RoundFigure, *, level: float = LEVEL) -> Effect | None:
    """Head against base on a positive per-round figure (step time, tokens/s), its interval at `level`; None with
    < MIN_ROUNDS rounds."""
    logs = []
    for own_rows, base_rows in common_rounds(current, base):
        own, other = figure(current, own_rows), figure(base, base_rows)
        if own is not None and other is not None and own > 0 and other > 0:
            logs.append(math.log(own) - math.log(other))
    n = len(logs)
    if n < MIN_ROUNDS:
        return None
    d, se, dof = trimmed_mean(logs)
    proc = process_sd(current)
    sd_log = math.sqrt(se**2 + proc**2)
    half = t_quantile((1 + level) / 2, dof) * sd_log
    step_sd = per_step_log_sd(current.steady_step_times) or 0.0
    return Effect(
        delta_pct=100 * math.expm1(d),
        low_pct=100 * math.expm1(d - half),
        high_pct=100 * math.expm1(d + half),
        sd_log=sd_log,
        run_spread_pct=100 * statistics.stdev(logs),
        prior_spread_pct=100 * proc,
        dof=dof,
        num_baselines=1,
        step_sd_log=step_sd,
        paired_rounds=n,
        level=level,
    )


def steps_to_resolve(effect: Effect, min_effect_pct: float, k: float, target_pct: float = RESOLVE_PCT) -> float | None:
    """How many times its steps a pair would need for a +`target_pct` % change to fail its step time 4 times in 5,
    at the rounds' spread it measured: None when it has enough; math.inf when no length would do (the process-level
    spread alone keeps the limit too high).

    A change t lands over the limit max(m, k x s) 4 times in 5 when t - z x s clears it, z = 0.84: s must be at most
    min(t / (k + z), (t - m) / z). The rounds' share of s falls with the square root of their number; the
    process-level share does not."""
    target, floor = math.log1p(target_pct / 100), math.log1p(min_effect_pct / 100)
    if effect.paired_rounds is None or target <= floor:
        return None
    needed = min(target / (k + _RESOLVE_Z), (target - floor) / _RESOLVE_Z)
    if effect.sd_log <= needed:
        return None
    process = effect.prior_spread_pct / 100
    if needed <= process:
        return math.inf
    return (effect.sd_log**2 - process**2) / (needed**2 - process**2)


def paired_points(current: RunData, base: RunData, share: RoundFigure, *, level: float = LEVEL) -> PairedPoints | None:
    """Head minus base of a share (0..1) per round, in percentage points, its interval at `level`; None with
    < MIN_ROUNDS rounds."""
    pairs = [
        (own, other)
        for own_rows, base_rows in common_rounds(current, base)
        if (own := share(current, own_rows)) is not None and (other := share(base, base_rows)) is not None
    ]
    n = len(pairs)
    if n < MIN_ROUNDS:
        return None
    d, se, dof = trimmed_mean([100 * (own - other) for own, other in pairs])
    half = t_quantile((1 + level) / 2, dof) * se
    return PairedPoints(
        delta_pp=d, low_pp=d - half, high_pp=d + half, rounds=n, level=level,
        base=100 * statistics.fmean(o for _, o in pairs), current=100 * statistics.fmean(c for c, _ in pairs),
    )  # fmt: skip


def step_time(run: RunData, rows: Sequence[int]) -> float | None:
    values = [t for r in rows if (t := run.step_times[r]) is not None and t > 0]
    return statistics.median(values) if values else None


def running_step_time(run: RunData, rows: Sequence[int]) -> float | None:
    """The round's median step time less the training thread's wait for a CPU (`running_time`)."""
    values = [t for r in rows if (t := _running(run, r)) is not None]
    return statistics.median(values) if values else None


def running_tokens_per_s(run: RunData, rows: Sequence[int]) -> float | None:
    """Tokens per second of running time (`running_time`) over the round."""
    tokens = _column(run, schema.NUM_TOKENS)
    pairs = [(k, t) for r in rows if (k := tokens[r]) is not None and (t := _running(run, r)) is not None]
    time = sum(t for _, t in pairs)
    return sum(k for k, _ in pairs) / time if pairs and time > 0 else None


def _running(run: RunData, row: int) -> float | None:
    wall, wait = run.step_times[row], _column(run, schema.RUNQUEUE_WAIT_S)[row]
    if wall is None or wait is None or not 0 <= wait < wall:
        return None
    return wall - wait


def _measured(run: RunData) -> bool:
    """Whether every steady step of the run has its run-queue wait (an older side, or a kernel without schedstat,
    has none)."""
    waits = _column(run, schema.RUNQUEUE_WAIT_S)
    return bool(run.steady_rows) and all(waits[r] is not None for r in run.steady_rows or [])


def gpu_busy(run: RunData, rows: Sequence[int]) -> float | None:
    """The round's median GPU busy time per step (the steps timed on the GPU)."""
    values = [b for r in rows if r < len(run.gpu_busy) and (b := run.gpu_busy[r]) is not None and b > 0]
    return statistics.median(values) if values else None


def tokens_per_s(run: RunData, rows: Sequence[int]) -> float | None:
    tokens = _column(run, schema.NUM_TOKENS)
    pairs = [(k, t) for r in rows if (k := tokens[r]) is not None and (t := run.step_times[r]) is not None]
    time = sum(t for _, t in pairs)
    return sum(k for k, _ in pairs) / time if pairs and time > 0 else None


def share_of(name: str) -> RoundFigure:
    """The round's share of step time spent in column `name` (data wait, generation)."""

    def share(run: RunData, rows: Sequence[int]) -> float | None:
        part = _column(run, name)
        pairs = [(p, t) for r in rows if (p := part[r]) is not None and (t := run.step_times[r]) is not None]
        time = sum(t for _, t in pairs)
        return sum(p for p, _ in pairs) / time if pairs and time > 0 else None

    return share


@dataclass(frozen=True)
class Timing:
    """What a pair's speed checks judge per round (`running_time` decides)."""

    step_time: RoundFigure
    tokens_per_s: RoundFigure
    basis: str
    """How the step time was taken, in words for the check's message."""


WALL: Final = Timing(step_time, tokens_per_s, "wall time")
RUNNING: Final = Timing(running_step_time, running_tokens_per_s, "time less the wait for a CPU")


def running_time(current: RunData, base: RunData) -> Timing:
    """Step times less the training thread's wait for a CPU (its run-queue wait, proc/runqueue_wait_s), where
    both sides measured it and the head side does not wait longer than the base side.

    A neighbour that takes the CPU for a moment (another job on the runner, a bursty hog) lands in one side's turn
    and not the other's; that wait is the machine's, not the code's, and it is what spreads a loaded pair's rounds
    (docs/benchmarks.md, "Time waiting for a CPU"). Left out, a pair beside a bursty neighbour judges nearly as
    precisely as a quiet one. The wait a pull request's own code causes (more threads than CPUs) is a real
    regression, and it is in most of its steps, where a burst is in a few: where the head side's median step waits
    more than the base side's by WAIT_GAP_PP points of step time, or its mean share is clearly more by as much, the
    pair is judged on wall time — as it is beside a neighbour that keeps the CPU busy all along, when the two
    sides' medians drift apart by chance (safe: that is the judgement without this).
    """
    if not _measured(current) or not _measured(base):
        return WALL
    if _median_wait_share(current) - _median_wait_share(base) > WAIT_GAP_PP / 100:
        return WALL
    gap = paired_points(current, base, share_of(schema.RUNQUEUE_WAIT_S))
    if gap is None or (gap.low_pp > 0 and gap.delta_pp > WAIT_GAP_PP):
        return WALL
    return RUNNING


def _median_wait_share(run: RunData) -> float:
    """The median over the run's steady steps of the share of the step spent waiting for a CPU."""
    waits = _column(run, schema.RUNQUEUE_WAIT_S)
    shares = [w / t for r in run.steady_rows or [] if (w := waits[r]) is not None and (t := run.step_times[r])]
    return statistics.median(shares) if shares else 0.0


def _column(run: RunData, name: str) -> list[float | None]:
    series = run.metrics.series if run.metrics is not None else {}
    return series.get(name) or [None] * len(run.step_times)


def trimmed_mean(values: Sequence[float], trim: float = TRIM) -> tuple[float, float, int]:
    """Yuen's trimmed mean: (mean of the middle values, its standard error, degrees of freedom).

    With h values kept of n and s_w^2 the winsorized sample variance (the trimmed values replaced by the
    nearest kept one): SE = sqrt((n - 1) s_w^2 / (h (h - 1))), dof = h - 1.
    """
    ordered = sorted(values)
    n = len(ordered)
    cut = int(trim * n)
    kept = ordered[cut : n - cut]
    h = len(kept)
    low, high = kept[0], kept[-1]
    winsorized = [min(max(v, low), high) for v in ordered]
    se = math.sqrt((n - 1) * statistics.variance(winsorized) / (h * (h - 1)))
    return statistics.fmean(kept), se, h - 1
