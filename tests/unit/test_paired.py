"""Paired statistics of a lockstep pair (compare/paired.py), on pairs whose drift and effect are planted.

The real pair (two processes taking turns) is tested in tests/integration/test_lockstep.py; here the two
sides' series are built so that what the statistics must do can be checked exactly: drift that moves both
sides cancels, a planted slowdown is found, an A/A pair passes, and unjudged stays unjudged.
"""

from __future__ import annotations

import json
import math
import random
import re
import statistics
from collections.abc import Collection
from dataclasses import replace
from pathlib import Path

import pytest

from canary_action.compare.command import run_compare
from canary_action.compare.result import CompareResult
from canary_action.metrics import schema
from canary_action.metrics.io import read_metrics, write_metrics
from canary_action.report.render import check_output, render
from tests.factories import make_metrics

PAIR = "tiny-dpo-pair-20261124T150000Z"


def make_pair(
    tmp: Path, *, slowdown: float = 0.0, steps: int = 120, chunk: int = 2, seed: int = 0, wait_share: float = 0.02,
    head_wait_share: float | None = None, paired: bool = True, base_stalled: Collection[int] = (),
    hog: float = 0.0, head_own_wait: float = 0.0, runqueue: Collection[str] = (), head_tokens: float | None = None,
) -> tuple[Path, Path]:  # fmt: skip
    """(base, head) metrics.json of one pair: a machine whose speed drifts by +-40 % over the run, hitting
    both sides' chunk of a round alike, 3 % per-step noise each, and `slowdown` on the head side. Each step's CPU
    time is 90 % of its wall time, but in the rounds `base_stalled`, where the base side was stopped for twice its
    steps' time: its wall time tripled, its CPU time not.

    A bursty neighbour (`hog` > 0) takes the CPU in a third of each side's turns, at random: those steps wait
    `hog` x their time on the run queue, added to their wall time. `head_own_wait`: the head side waits that share
    of every step for a CPU (its own threads). The sides in `runqueue` record the wait (proc/runqueue_wait_s).
    `head_tokens`: every step holds 2,048 tokens, the head's that many times more."""
    rng, bursts = random.Random(seed), random.Random(f"bursts {seed}")
    drift = [1 + 0.4 * math.sin(s / 9) + 0.2 * rng.random() for s in range(1, steps + 1)]
    round_of = [(s - 1) // chunk for s in range(1, steps + 1)]
    paths = []
    for side, factor, wait in (("base", 1.0, wait_share), ("head", 1 + slowdown, head_wait_share or wait_share)):
        times = [0.3 * d * factor * math.exp(rng.gauss(0, 0.03)) for d in drift]
        times[0] = 2.0
        cpu = [0.9 * t for t in times]
        hit = {r for r in sorted(set(round_of)) if hog and bursts.random() < 1 / 3}
        queued = [(hog if r in hit else 0.0) * t for t, r in zip(times, round_of, strict=True)]
        if side == "head":
            queued = [q + head_own_wait * t for q, t in zip(queued, times, strict=True)]
        times = [t + q for t, q in zip(times, queued, strict=True)]
        if side == "base":
            times = [3 * t if r in base_stalled else t for t, r in zip(times, round_of, strict=True)]
        series = {
            schema.STEP_TIME_S: times,
            schema.CPU_S: cpu,
            schema.DATA_WAIT_S: [wait * t for t in times],
            schema.PAIR_ROUND: [float(r) for r in round_of],
        }
        if side in runqueue:
            series[schema.RUNQUEUE_WAIT_S] = queued
        if head_tokens is not None:  # 2,048 tokens a step, the head's that many times more
            series[schema.NUM_TOKENS] = [2048.0 * (head_tokens if side == "head" else 1.0)] * steps
        pair = {"pair_id": PAIR, "side": side, "chunk_steps": chunk, "tree": f"/trees/{side}"} if paired else None
        metrics = make_metrics(num_steps=steps, series=series, pair=pair, workload={"device": "cpu", "dtype": "fp32"})
        metrics = metrics.model_copy(update={"run": metrics.run.model_copy(update={"run_id": f"{PAIR}-{side}"})})
        path = tmp / side / "metrics.json"
        write_metrics(metrics, path)
        paths.append(path)
    return paths[0], paths[1]


def judge(base: Path, head: Path, tier: str = "nightly") -> CompareResult:
    return run_compare(head, [base], tier=tier)  # type: ignore[arg-type]


def check(result: CompareResult, name: str):  # type: ignore[no-untyped-def]
    return next(c for c in result.checks if c.name == name)


def test_a_planted_slowdown_is_found_through_drift_that_hides_it_from_separate_runs(tmp_path: Path) -> None:
    base, head = make_pair(tmp_path / "paired", slowdown=0.10)
    result = judge(base, head)
    step = check(result, "step_time")
    assert result.verdict == "regression"
    assert step.status == "fail"
    assert step.interval is not None
    assert step.interval.low < 10 < step.interval.high
    assert "paired over 60 rounds — above the 3.3 % minimum effect (3 %, raised to this pair's noise)" in step.message
    assert result.pairing is not None
    assert result.pairing.base_run_id == f"{PAIR}-base"
    assert result.noise is not None
    assert "paired A/B" in result.noise.method
    for kind in ("comment", "markdown", "summary"):
        assert "**Paired A/B** on this runner" in render(result, kind)  # type: ignore[arg-type]
    assert "Paired A/B" in check_output(result)["summary"]
    # The same series without the pairing: judged as separate runs, the drift hides the slowdown.
    base, head = make_pair(tmp_path / "separate", slowdown=0.10, paired=False)
    separate = judge(base, head)
    assert check(separate, "step_time").status != "fail"
    assert separate.pairing is None


def test_a_pair_is_judged_by_its_own_precision_not_by_the_separate_run_limit(tmp_path: Path) -> None:
    """+5 % is under every tier's separate-run limit but default (10 %), and a pair with ~1 % noise catches it: the
    pair's limit is the 3 % minimum effect raised to 3 x its noise SD, whatever the tier or the step-time limit."""
    base, head = make_pair(tmp_path, slowdown=0.05)
    lenient = tmp_path / "lenient.yaml"
    lenient.write_text("max_step_time_increase_pct: 50\n", encoding="utf-8")
    for result in (
        judge(base, head, "default"),
        judge(base, head, "smoke"),
        run_compare(head, [base], threshold_file=lenient),
    ):
        step = check(result, "step_time")
        assert step.status == "fail", step.message
        assert 3 <= step.threshold < 4  # type: ignore[operator]
        assert "— above the 3" in step.message, step.message
        assert result.verdict == "regression"


def test_the_paired_minimum_effect_is_a_threshold_key(tmp_path: Path) -> None:
    base, head = make_pair(tmp_path, slowdown=0.05)
    wide = tmp_path / "wide.yaml"
    wide.write_text("paired_min_effect_pct: 8\n", encoding="utf-8")
    step = check(run_compare(head, [base], threshold_file=wide), "step_time")
    assert step.status == "pass"
    assert step.message.endswith("— within the 8 % minimum effect"), step.message
    assert step.threshold == 8


def test_a_change_over_the_minimum_effect_that_is_not_clear_warns(tmp_path: Path) -> None:
    """run_spread_k 0 leaves the minimum effect unraised: a change over it inside the interval warns."""
    base, head = make_pair(tmp_path, slowdown=0.025, seed=4)
    bare = tmp_path / "bare.yaml"
    bare.write_text("run_spread_k: 0\npaired_min_effect_pct: 1\nconfidence_level: 0.9999\n", encoding="utf-8")
    step = check(run_compare(head, [base], threshold_file=bare), "step_time")
    assert step.interval is not None
    assert step.interval.low < 0 < step.interval.high
    assert step.delta_pct is not None
    assert step.delta_pct > 1
    assert step.status == "warn"
    assert step.message.endswith("above the 1 % minimum effect, but not statistically clear")


def test_an_aa_pair_passes(tmp_path: Path) -> None:
    for seed in range(5):
        result = judge(*make_pair(tmp_path / str(seed), seed=seed))
        assert check(result, "step_time").status == "pass", check(result, "step_time").message


def test_the_process_level_spread_is_in_the_interval(tmp_path: Path) -> None:
    """Even with noiseless rounds the interval keeps the process-to-process part (PROCESS_SD)."""
    from canary_action.compare import paired

    result = judge(*make_pair(tmp_path, slowdown=0.0, seed=3))
    interval = check(result, "step_time").interval
    assert interval is not None
    assert interval.high - interval.low > 2 * 1.9 * 100 * paired.PROCESS_SD["cpu"]


def test_a_pair_too_short_for_rounds_is_not_judged(tmp_path: Path) -> None:
    result = judge(*make_pair(tmp_path, steps=12, chunk=4), tier="smoke")
    step = check(result, "step_time")
    assert step.status == "skip"
    assert step.fix is not None
    assert "--chunk-steps" in step.fix
    assert result.verdict == "neutral"


def test_more_data_wait_warns_with_its_paired_interval(tmp_path: Path) -> None:
    result = judge(*make_pair(tmp_path, wait_share=0.02, head_wait_share=0.12))
    wait = check(result, "data_wait_share")
    assert wait.status == "warn"
    assert wait.interval is not None
    assert wait.interval.low > 0
    assert "paired over" in wait.message


def test_only_the_same_pair_pairs(tmp_path: Path) -> None:
    """A base side of another pair is an ordinary baseline: no paired statistics."""
    base, _ = make_pair(tmp_path / "one", seed=1)
    _, head = make_pair(tmp_path / "two", seed=2)
    other = base.read_text(encoding="utf-8").replace(PAIR, "another-pair")
    base.write_text(other, encoding="utf-8")
    assert judge(base, head).pairing is None


def test_the_trimmed_mean_is_yuens() -> None:
    """1..10 trimmed 20 %: the mean of 3..8, SE from the winsorized variance (3,3,3,4,...,8,8,8): 42.5 / 9."""
    from canary_action.compare.paired import trimmed_mean

    mean, se, dof = trimmed_mean([float(v) for v in range(10, 0, -1)])
    assert mean == 5.5
    assert se == pytest.approx(math.sqrt(9 * (42.5 / 9) / (6 * 5)))
    assert dof == 5


def test_a_pair_directory_alone_is_compared_head_against_base(tmp_path: Path) -> None:
    from canary_action.metrics.pair import PairRecord, Round, SideEnd

    make_pair(tmp_path, slowdown=0.10)
    ends = {s: SideEnd(tree=f"/trees/{s}", config_path="c.yaml", metrics_path=f"{s}/metrics.json", exit_code=0,
                       steps=120) for s in ("base", "head")}  # fmt: skip
    record = PairRecord(pair_id=PAIR, chunk_steps=2, seed=1, started_at="t", finished_at="t", wall_s=1.0,
                        rounds=[Round(index=0, order=["head", "base"])], **ends)  # fmt: skip
    (tmp_path / "pair.json").write_text(record.model_dump_json(), encoding="utf-8")
    result = run_compare(tmp_path, [], tier="nightly")
    assert result.current.run_id == f"{PAIR}-head"
    assert result.pairing is not None
    assert check(result, "step_time").status == "fail"


def test_a_corrupt_pair_record_or_no_baseline_is_bad_input(tmp_path: Path) -> None:
    from canary_action.errors import MetricsFileError, UsageError

    _, head = make_pair(tmp_path)
    (tmp_path / "pair.json").write_text('{"pair_id": 1}', encoding="utf-8")
    with pytest.raises(MetricsFileError, match="not a lockstep pair record"):
        run_compare(tmp_path, [])
    with pytest.raises(UsageError, match="no baseline given"):
        run_compare(head, [])


def test_a_pair_is_judged_at_the_thresholds_confidence_level(tmp_path: Path) -> None:
    """confidence_level reaches the paired statistics too: step time and the shares of step time."""
    base, head = make_pair(tmp_path, wait_share=0.02, head_wait_share=0.12)
    usual = judge(base, head)
    strict_file = tmp_path / "strict.yaml"
    strict_file.write_text("confidence_level: 0.99\n", encoding="utf-8")
    strict = run_compare(head, [base], tier="nightly", threshold_file=strict_file)
    for name in ("step_time", "data_wait_share"):
        wide, narrow = check(strict, name).interval, check(usual, name).interval
        assert wide is not None
        assert narrow is not None
        assert (wide.level, narrow.level) == (0.99, 0.95)
        assert wide.low <= narrow.low  # the planted shares are exact: every round the same, a zero-width interval
        assert narrow.high <= wide.high
    wide, narrow = check(strict, "step_time").interval, check(usual, "step_time").interval
    assert wide is not None
    assert narrow is not None
    assert wide.high - wide.low > narrow.high - narrow.low
    assert strict.noise is not None
    assert "99 % t interval" in strict.noise.method


def write_record(tmp: Path, code: object = None) -> None:
    from canary_action.metrics.pair import PairRecord, Round, SideEnd

    ends = {s: SideEnd(tree=f"/trees/{s}", config_path="c.yaml", metrics_path=f"{s}/metrics.json", exit_code=0,
                       steps=120) for s in ("base", "head")}  # fmt: skip
    record = PairRecord(pair_id=PAIR, chunk_steps=2, seed=1, started_at="t", finished_at="t", wall_s=1.0,
                        rounds=[Round(index=0, order=["head", "base"])], code=code, **ends)  # fmt: skip
    (tmp / "pair.json").write_text(record.model_dump_json(), encoding="utf-8")


def test_a_slower_pair_names_the_files_the_pull_request_changed_first(tmp_path: Path) -> None:
    """Same config, same stack: the code the head tree changed is the first place to look, with the lines it
    added; no advice to check dependency changes when none moved."""
    from canary_action.metrics.pair import CodeChange, CodeDiff

    make_pair(tmp_path, slowdown=0.10)
    factory = CodeChange(path="team/factory.py", change="modified", lines_added=2, lines_removed=0,
                         added=["with torch.no_grad():", "model.eval()(**inputs)"])  # fmt: skip
    readme = CodeChange(path="README.md", change="modified", lines_added=30, lines_removed=2, added=["# Docs"])
    write_record(tmp_path, CodeDiff(method="git", files=[readme, factory], num_files=2, base_commit="a" * 40))
    result = run_compare(tmp_path, [], tier="nightly")
    first = result.suspects[0]
    assert first.category == "code"
    assert first.summary.startswith("the pull request's code: team/factory.py and 1 more file changed against")
    assert "team/factory.py adds: with torch.no_grad(): · model.eval()(**inputs)" in first.evidence
    assert not any("dependency" in s for suspect in result.suspects for s in suspect.next_steps)
    assert result.pairing is not None
    assert result.pairing.code is not None
    assert result.pairing.code.files[1].path == "team/factory.py"
    comment = render(result, "comment")
    assert "Most likely cause: **code**" in comment
    assert "team/factory.py" in comment


def test_documentation_alone_is_no_code_evidence(tmp_path: Path) -> None:
    from canary_action.metrics.pair import CodeChange, CodeDiff

    make_pair(tmp_path, slowdown=0.10)
    readme = CodeChange(path="docs/guide.md", change="modified", lines_added=3, added=["more words"])
    write_record(tmp_path, CodeDiff(method="walk", files=[readme], num_files=1))
    result = run_compare(tmp_path, [], tier="nightly")
    assert "code" not in [s.category for s in result.suspects]


def test_the_paired_line_names_both_commits_the_rule_and_the_allocator(tmp_path: Path) -> None:
    base, head = make_pair(tmp_path, slowdown=0.10)
    for path, sha in ((base, "b" * 40), (head, "c" * 40)):
        data = json.loads(path.read_text(encoding="utf-8"))
        data["run"]["git_sha"] = sha
        data["pair"]["allocator"] = "tuned"
        path.write_text(json.dumps(data), encoding="utf-8")
    result = judge(base, head)
    line = render(result, "comment")
    assert f"the PR's code (`{'c' * 12}`) and its base commit (`{'b' * 12}`) took turns" in line
    assert "a change fails when it is clear and above the 3 % minimum effect" in line
    assert "glibc malloc tuned to keep freed memory, for precision" in line


def _separate_runs(tmp: Path, step_time_s: float, n: int = 3) -> list[Path]:
    """Separate runs of the same config (artifact history), on a machine that did not drift."""
    like = make_metrics(num_steps=120)  # the pair's sides: seed 0's config and dataset
    workload = {"device": "cpu", "dtype": "fp32", "dataset_fingerprint": like.workload.dataset_fingerprint}
    paths = []
    for i in range(n):
        metrics = make_metrics(num_steps=120, step_time_s=step_time_s, seed=100 + i, workload=workload,
                               config=like.config)  # fmt: skip
        path = tmp / f"history-{i}" / "metrics.json"
        write_metrics(metrics, path)
        paths.append(path)
    return paths


def test_a_paired_pass_never_overrides_a_failure_against_the_history(tmp_path: Path) -> None:
    """Both sides 2x slower than three separate runs (a base side made as slow as the head): the pair says equal,
    the history says +100 %, and the failure stands. The same history at the pair's speed changes nothing."""
    base, head = make_pair(tmp_path / "pair")
    faster_history = _separate_runs(tmp_path / "faster", 0.15)
    for trusted in (True, False):
        result = run_compare(head, [base, *faster_history], tier="nightly", trusted_pair=trusted)
        step = check(result, "step_time")
        assert step.status == "fail", step.message
        assert "against 3 baselines" in step.message
        assert "whatever the lockstep pair says (-0.0 %" in step.message
        assert result.pairing is not None
    median = json.loads(head.read_text())["summary"]["step_time_s"]["median"]
    like = run_compare(head, [base, *_separate_runs(tmp_path / "like", median)], tier="nightly")
    assert "paired over" in check(like, "step_time").message
    assert check(like, "step_time").status == "pass"


def test_an_untrusted_pairs_base_side_is_its_partner_only(tmp_path: Path) -> None:
    """Report mode: the base side is judged against round by round, never counted as a baseline; with no other
    baseline, the paired checks are still judged and the rest have none."""
    base, head = make_pair(tmp_path, slowdown=0.10)
    result = run_compare(head, [base], tier="nightly", trusted_pair=False)
    assert check(result, "step_time").status == "fail"
    assert "paired over" in check(result, "step_time").message
    assert result.baselines == []
    assert result.pairing is not None
    trusted = run_compare(head, [base], tier="nightly")
    assert [b.run_id for b in trusted.baselines] == [f"{PAIR}-base"]


def test_rounds_in_which_the_base_side_was_stopped_are_left_out_and_named(tmp_path: Path) -> None:
    """A head side that stops the base side (SIGSTOP) in some of its turns makes those rounds look like a head
    speed-up; the base side's CPU time per wall second collapses in them, and they are left out."""
    stalled = {5, 17, 33}
    base, head = make_pair(tmp_path, slowdown=0.10, base_stalled=stalled)
    result = judge(base, head)
    step = check(result, "step_time")
    assert step.status == "fail", step.message
    assert "paired over 57 rounds" in step.message  # 60 steady rounds, 3 left out
    [note] = [n for n in result.notes if "stopped or starved" in n]
    assert "in 3 of 60 rounds" in note
    assert "rounds 5, 17, 33" in note
    assert "left out of the paired checks" in note


def test_a_base_side_stopped_in_many_rounds_leaves_the_pair_unjudged_never_passed(tmp_path: Path) -> None:
    """Stopped in half its rounds, the base side would hide a +10 % slowdown (those rounds read -60 %): more than a
    quarter of the rounds stalled, and the paired checks are not judged: neutral, saying why."""
    base, head = make_pair(tmp_path, slowdown=0.10, base_stalled=set(range(0, 60, 2)))
    result = judge(base, head)
    step = check(result, "step_time")
    assert step.status == "skip"
    assert "the base side was stopped or starved in 30 of 60 rounds" in step.message
    assert "Integrity" in (step.fix or "")
    assert result.verdict == "neutral"
    # Stopped in every round, its own median is the stalled figure: the head side's (same config, same CPUs) shows it.
    base, head = make_pair(tmp_path / "all", slowdown=0.10, base_stalled=set(range(60)))
    step = check(judge(base, head), "step_time")
    assert step.status == "skip"
    assert "stopped or starved in 60 of 60 rounds" in step.message


def test_an_a_a_pair_with_steady_cpu_flags_no_round(tmp_path: Path) -> None:
    base, head = make_pair(tmp_path)
    result = judge(base, head)
    assert not [n for n in result.notes if "stopped or starved" in n]
    assert "paired over 60 rounds" in check(result, "step_time").message


def test_a_neighbours_bursts_are_left_out_of_a_pairs_step_time(tmp_path: Path) -> None:
    """A bursty neighbour adds 40 % to a third of each side's turns: on wall time a pair's rounds spread so far
    that its limit rises past a real +5 %; less the training thread's wait for a CPU (both sides record it), the
    same pair is as precise as a quiet one, fails the +5 % and passes an A/A."""
    both = ("base", "head")
    for seed in (1, 2, 3):  # seeded: the same bursts on every machine
        planted = make_pair(tmp_path / f"slow{seed}", slowdown=0.05, hog=0.4, runqueue=both, seed=seed)
        step = check(judge(*planted), "step_time")
        assert step.status == "fail", step.message
        assert "(time less the wait for a CPU)" in step.message
        assert step.threshold is not None
        assert step.threshold < 4.5, step.message
        # The figures shown are on the same footing: the head's steps less their wait, the base's from the effect.
        head_wall = read_metrics(planted[1]).summary
        assert head_wall is not None
        assert step.current is not None
        assert step.current < head_wall.step_time_s.median
        aa = check(judge(*make_pair(tmp_path / f"aa{seed}", hog=0.4, runqueue=both, seed=seed)), "step_time")
        assert aa.status == "pass", aa.message
        # Unrecorded on one side: wall time for both, and the neighbour's bursts widen the limit past the +5 %.
        wall = check(
            judge(*make_pair(tmp_path / f"wall{seed}", slowdown=0.05, hog=0.4, runqueue=["base"], seed=seed)),
            "step_time",
        )
        assert "wait for a CPU" not in wall.message
        assert wall.threshold is not None
        assert wall.threshold > 2 * step.threshold, (wall.message, step.message)
        assert wall.status != "fail", wall.message


def test_a_head_that_waits_for_a_cpu_because_of_its_own_threads_is_judged_on_wall_time(tmp_path: Path) -> None:
    """A pull request that runs more threads than CPUs waits on the run queue in every step: a real slowdown.
    The head's median step waiting longer than the base's puts the pair back on wall time, where it fails."""
    base, head = make_pair(tmp_path, head_own_wait=0.10, runqueue=("base", "head"))
    step = check(judge(base, head), "step_time")
    assert step.status == "fail", step.message
    assert "wait for a CPU" not in step.message
    assert step.delta_pct is not None
    assert 7 < step.delta_pct < 13
    # Beside a bursty neighbour too, whose bursts make the rounds' wait shares too noisy for a clear difference:
    # the median step is not in a burst, and its wait is the head's own (a reviewer's case: 5 % of every step).
    for seed in (1, 2, 3):
        base, head = make_pair(tmp_path / str(seed), head_own_wait=0.05, hog=0.4, runqueue=("base", "head"), seed=seed)
        step = check(judge(base, head), "step_time")
        assert "wait for a CPU" not in step.message, step.message


def test_a_pairs_tokens_per_second_are_timed_as_its_steps_are(tmp_path: Path) -> None:
    """Tokens/s is judged when the tokens per step changed (here the head packs 10 % more into a step that takes
    15 % longer): on the same footing as step time, less the wait for a CPU beside a neighbour."""
    base, head = make_pair(tmp_path, slowdown=0.15, head_tokens=1.1, hog=0.4, runqueue=("base", "head"), seed=1)
    tokens = check(judge(base, head), "tokens_per_sec")
    assert "(time less the wait for a CPU)" in tokens.message, tokens.message
    assert tokens.delta_pct is not None
    assert -6 < tokens.delta_pct < -3  # 1.10 / 1.15 - 1 = -4.3 %


def test_a_pair_too_noisy_for_five_percent_says_how_long_its_canary_must_be(tmp_path: Path) -> None:
    """A bursty neighbour nobody timed (no run-queue column) spreads a short pair's rounds: its limit is raised past
    where a +5 % slowdown would fail 4 times in 5, and its note says how many times its steps would do it. The advice
    is for the noise the pair measured, an estimate: pairs as long as advised, as noisy per round, judge with limits
    each lower than their short pair's and, over five seeds, near the 3 x 1.27 % = 3.8 % a +5 % needs. A failed
    check asks nothing."""
    shorts, longs = [], []
    for seed in range(2, 7):
        step = check(
            judge(*make_pair(tmp_path / f"short{seed}", steps=60, hog=0.15, seed=seed), "default"), "step_time"
        )
        assert step.status != "fail", step.message
        assert step.threshold is not None
        assert step.threshold > 5, step.threshold
        note = step.threshold_note or ""
        assert note.startswith("widened from 3 % to"), note
        found = re.search(r"to fail a \+5 % slowdown 4 times in 5, this canary needs about ([\d.]+)× its steps "
                          r"\(max_steps: (\d+)\)", note)  # fmt: skip
        assert found, note
        factor, steps = float(found[1]), int(found[2])
        assert 2 < factor < 40
        assert steps == math.ceil(factor * 60)
        longer = check(
            judge(*make_pair(tmp_path / f"long{seed}", steps=steps, hog=0.15, seed=seed), "default"), "step_time"
        )
        assert longer.threshold is not None
        assert longer.threshold < step.threshold, (longer.threshold, step.threshold)
        shorts.append(step.threshold)
        longs.append(longer.threshold)
    assert statistics.median(longs) < 4.2, (shorts, longs)
    base, head = make_pair(tmp_path / "short2", steps=60, hog=0.15, seed=2)
    assert "this canary needs about" in render(judge(base, head, "default"), "markdown")
    slower = check(
        judge(*make_pair(tmp_path / "slower", steps=60, hog=0.15, seed=2, slowdown=0.5), "default"), "step_time"
    )
    assert slower.status == "fail", slower.message
    assert "needs about" not in (slower.threshold_note or ""), slower.threshold_note


def test_the_length_a_pair_needs_follows_its_rounds_spread_not_its_process_spread() -> None:
    """steps_to_resolve: the rounds' share of a pair's SD falls with the square root of its length, the process-level
    share (1 %) does not: 2.2 % of rounds need (2.2² ) / (1.27² - 1²) ≈ 7.9 times the steps; a pair already precise
    enough needs none; with a process-level spread over 1.27 %, no length is enough."""
    from canary_action.compare.paired import steps_to_resolve
    from canary_action.compare.stats import Effect

    def effect(rounds_pct: float, process_pct: float) -> Effect:
        sd = math.hypot(rounds_pct, process_pct) / 100
        return Effect(delta_pct=0.0, low_pct=-5.0, high_pct=5.0, sd_log=sd, run_spread_pct=10.0,
                      prior_spread_pct=process_pct, dof=30, num_baselines=1, paired_rounds=40)  # fmt: skip

    factor = steps_to_resolve(effect(2.2, 1.0), min_effect_pct=3, k=3)
    assert factor is not None
    # Independently: at factor x the rounds, the pair's SD and its limit max(3 %, 3 SD) leave an exact +5 % over the
    # limit 4 times in 5 (a normal tail, from erfc).
    sd = math.sqrt((0.022**2) / factor + 0.01**2)
    limit = max(math.log1p(0.03), 3 * sd)
    assert 0.5 * math.erfc((limit - math.log1p(0.05)) / sd / math.sqrt(2)) == pytest.approx(0.8, abs=1e-3)
    assert factor == pytest.approx(2.2**2 / ((100 * math.log1p(0.05) / 3.8416) ** 2 - 1), rel=1e-3)
    assert 7.5 < factor < 8.3
    assert steps_to_resolve(effect(0.5, 1.0), min_effect_pct=3, k=3) is None
    assert steps_to_resolve(effect(2.0, 1.3), min_effect_pct=3, k=3) == math.inf
    assert steps_to_resolve(effect(2.2, 1.0), min_effect_pct=6, k=3) is None  # a minimum effect over 5 % asks nothing
    unpaired = replace(effect(2.2, 1.0), paired_rounds=None)
    assert steps_to_resolve(unpaired, min_effect_pct=3, k=3) is None  # separate runs: length is not the lever
