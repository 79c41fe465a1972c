"""The correctness checks (compare/numerics.py, compare/heldout.py) on pairs and runs whose numerics and held-out
figures are planted, so that each rule can be checked exactly: identical stays identical, rounding is within
tolerance, a changed math is said with its first step, a worse held-out figure fails and a better one passes,
and what cannot be judged says so. Real pairs are in tests/integration/test_correctness.py."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from canary_action.compare.command import run_compare
from canary_action.compare.result import Check, CompareResult
from canary_action.metrics import schema
from canary_action.metrics.heldout import HeldoutEval, HeldoutPoint
from canary_action.metrics.io import write_metrics
from canary_action.metrics.pair import PairRecord, Round, SideEnd
from tests.factories import make_metrics

PAIR = "team-sft-pair-20261127T120000Z"
STEPS = 40
N = 64


def evaluation(worse_by: float = 0.0, *, learned: float = 1.0, seed: int = 0, fingerprint: str = "f" * 64,
               metric: str = "next_token", noise: float = 0.05) -> HeldoutEval:  # fmt: skip
    """A held-out evaluation: per example, the start near 8.3 nats, the end `learned` lower, plus `worse_by`."""
    rng = random.Random(1000)
    start = [8.3 + rng.gauss(0, 0.1) for _ in range(N)]
    noisy = random.Random(seed)
    end = [s - learned + worse_by + noisy.gauss(0, noise) for s in start]
    if metric == "preference":  # higher is better: the margin grows from 0
        start, end = [0.0] * N, [learned - worse_by + noisy.gauss(0, noise) for _ in range(N)]
    return HeldoutEval(
        status="evaluated", metric=metric, dataset="builtin:sft, its held-out part", num_examples=N,  # type: ignore[arg-type]
        fingerprint=fingerprint, evaluated_in="fresh_process",
        points=[HeldoutPoint(step=0, value=sum(start) / N, examples=start),
                HeldoutPoint(step=STEPS, value=sum(end) / N, examples=end)],
    )  # fmt: skip


def side(tmp: Path, name: str, *, loss_shift: float = 0.0, from_step: int = 1, device: str = "cpu",
         rounding: float = 0.0) -> Path:  # fmt: skip
    rng = random.Random(7)
    losses = [8.3 - 0.025 * s + rng.gauss(0, 0.01) for s in range(1, STEPS + 1)]
    grads = [1.0 + 0.1 * rng.random() for _ in losses]
    weights = [300.0 + 0.1 * s for s in range(1, STEPS + 1)]
    if name == "head":
        factor = [1.0 + (loss_shift if s >= from_step else 0.0) + rounding for s in range(1, STEPS + 1)]
        losses = [v * f for v, f in zip(losses, factor, strict=True)]
        grads = [v * f for v, f in zip(grads, factor, strict=True)]
        weights = [v * f for v, f in zip(weights, factor, strict=True)]
    series = {
        schema.LOSS: losses, schema.GRAD_NORM: grads, schema.WEIGHT_SUM: weights,
        schema.PAIR_ROUND: [float((s - 1) // 2) for s in range(1, STEPS + 1)],
        schema.CPU_S: [0.09] * STEPS,
    }  # fmt: skip
    metrics = make_metrics(
        num_steps=STEPS, series=series, workload={"device": device, "dtype": "fp32" if device == "cpu" else "bf16"},
        pair={"pair_id": PAIR, "side": name, "chunk_steps": 2, "tree": f"/trees/{name}"},
    )  # fmt: skip
    metrics = metrics.model_copy(update={"run": metrics.run.model_copy(update={"run_id": f"{PAIR}-{name}"})})
    path = tmp / name / "metrics.json"
    write_metrics(metrics, path)
    return path


def pair(tmp: Path, head_eval: HeldoutEval | None, base_eval: HeldoutEval | None = None, **head: Any) -> Path:
    """A pair's folder as `canary pair` leaves it: both sides and pair.json with their evaluations."""
    side(tmp, "base", device=head.get("device", "cpu"))
    side(tmp, "head", **head)
    end = SideEnd(tree="/t", config_path="/t/canary.yaml", metrics_path="x", exit_code=0, steps=STEPS)
    evaluations = {"base": base_eval or evaluation(), "head": head_eval} if head_eval is not None else None
    record = PairRecord(
        pair_id=PAIR, chunk_steps=2, seed=0, started_at="2026-11-27T12:00:00Z", finished_at="2026-11-27T12:01:00Z",
        wall_s=60.0, rounds=[Round(index=i, order=["base", "head"]) for i in range(STEPS // 2)], base=end, head=end,
        heldout=evaluations,  # type: ignore[arg-type]
    )  # fmt: skip
    (tmp / "pair.json").write_text(record.model_dump_json(), encoding="utf-8")
    return tmp


def check(result: CompareResult, name: str) -> Check:
    return next(c for c in result.checks if c.name == name)


def test_identical_sides_report_identical_numerics_and_pass(tmp_path: Path) -> None:
    result = run_compare(pair(tmp_path, evaluation()), [])
    assert result.numerics is not None
    assert result.numerics.state == "identical"
    assert check(result, "numerics").status == "pass"
    assert "bitwise equal at all 40 steps" in check(result, "numerics").message
    assert check(result, "heldout_eval").status == "pass"
    assert result.verdict == "pass"


def test_rounding_is_within_tolerance_and_says_its_largest_difference(tmp_path: Path) -> None:
    result = run_compare(pair(tmp_path, evaluation(), rounding=3e-7), [])
    assert result.numerics is not None
    assert result.numerics.state == "within_tolerance"
    assert "equal within tolerance: largest relative difference 3.0e-07" in check(result, "numerics").message
    assert result.verdict == "pass"


def test_a_worse_held_out_figure_fails_and_names_the_step_where_the_math_changed(tmp_path: Path) -> None:
    result = run_compare(pair(tmp_path, evaluation(worse_by=0.3), loss_shift=0.02, from_step=3), [])
    held = check(result, "heldout_eval")
    assert held.status == "fail"
    assert held.delta_pct == pytest.approx(30, abs=3)  # 0.3 of a learning of 1.0
    assert result.verdict == "regression"
    assert check(result, "numerics").status == "warn"
    assert "from step 3" in check(result, "numerics").message
    top = result.suspects[0]
    assert top.category == "numerics"
    assert "step 3" in top.summary
    assert any("the sides agree until step 3" in s for s in top.next_steps)


def test_a_changed_math_that_learns_as_well_passes_and_the_verdict_says_so(tmp_path: Path) -> None:
    result = run_compare(pair(tmp_path, evaluation(worse_by=0.002, seed=1), loss_shift=0.01), [])
    assert check(result, "heldout_eval").status == "pass"
    assert check(result, "numerics").status == "warn"
    assert result.verdict == "pass"
    assert result.reason.startswith("this pull request changes the training numerics from step 1: loss")
    assert "held-out evaluation finds no worse learning" in result.reason


def test_a_better_held_out_figure_passes(tmp_path: Path) -> None:
    result = run_compare(pair(tmp_path, evaluation(worse_by=-0.4), loss_shift=0.05), [])
    held = check(result, "heldout_eval")
    assert held.status == "pass"
    assert held.delta_pct is not None
    assert held.delta_pct < -30


def test_a_small_worsening_within_the_minimum_effect_passes(tmp_path: Path) -> None:
    """Clearly worse (its interval excludes 0), but by 2 % of the learning: under heldout_min_effect_pct (5)."""
    result = run_compare(pair(tmp_path, evaluation(worse_by=0.02, noise=0.001), loss_shift=0.01), [])
    held = check(result, "heldout_eval")
    assert held.interval is not None
    assert held.interval.low > 0
    assert held.status == "pass"


def test_fail_on_numerics_change_asks_for_an_acknowledgment_and_accepting_passes(tmp_path: Path) -> None:
    folder = pair(tmp_path / "p", evaluation(), loss_shift=0.01)
    strict = tmp_path / "strict.yaml"
    strict.write_text("fail_on_numerics_change: true\n", encoding="utf-8")
    refused = run_compare(folder, [], threshold_file=strict)
    assert check(refused, "numerics").status == "fail"
    assert check(refused, "numerics").fix is not None
    assert refused.verdict == "regression"
    accepted = run_compare(folder, [], threshold_file=strict, numerics_accepted=True)
    assert check(accepted, "numerics").status == "pass"
    assert "accepted for this commit" in check(accepted, "numerics").message


def test_one_cause_fails_one_check_when_a_changed_math_also_learns_worse(tmp_path: Path) -> None:
    strict = tmp_path / "strict.yaml"
    strict.write_text("fail_on_numerics_change: true\nfail_on_learning: true\n", encoding="utf-8")
    result = run_compare(pair(tmp_path / "p", evaluation(worse_by=0.5), loss_shift=0.2), [], threshold_file=strict)
    failed = [c.name for c in result.checks if c.status == "fail"]
    assert failed == ["heldout_eval"]
    assert "the same cause as the heldout_eval failure" in check(result, "numerics").message


def test_on_cuda_without_a_measured_tolerance_numerics_are_reported_not_judged(tmp_path: Path) -> None:
    result = run_compare(pair(tmp_path, evaluation(), device="cuda:0", rounding=1e-3), [])
    numerics = check(result, "numerics")
    assert numerics.status == "skip"
    assert numerics.fix is None  # nothing the user can change: a GPU measurement is missing
    assert "no tolerance measured for cuda bf16" in numerics.message
    assert result.numerics is not None
    assert not result.numerics.judged


def test_a_run_says_how_measurably_it_learned_and_when_it_is_too_little() -> None:
    """Item 5: `canary run` prints the learning a team sizes its canary by, in standard errors of it."""
    from canary_action.cli_summary import _heldout

    learned = evaluation(learned=1.0).learning()
    assert learned is not None
    assert learned[0] == pytest.approx(1.0, abs=0.03)  # lower is better: a loss 1 nat lower learned +1
    assert learned[0] / learned[1] > 100
    [line] = [s for s in _heldout(evaluation(learned=1.0)) if s.lstrip().startswith("learned")]
    assert "its standard error)" in line
    assert "too little" not in line
    [line] = [s for s in _heldout(evaluation(learned=0.005, noise=0.1)) if s.lstrip().startswith("learned")]
    assert "too little to judge learning: docs/correctness.md, 'Sizing a canary'" in line
    preference = evaluation(learned=0.4, metric="preference").learning()
    assert preference is not None
    assert preference[0] == pytest.approx(0.4, abs=0.03)
    assert HeldoutEval(status="skipped", reason="off").learning() is None


def test_a_base_side_that_did_not_learn_measurably_makes_the_verdict_neutral(tmp_path: Path) -> None:
    result = run_compare(pair(tmp_path, evaluation(learned=0.0), base_eval=evaluation(learned=-0.05, seed=2)), [])
    held = check(result, "heldout_eval")
    assert held.status == "skip"
    assert "did not learn measurably" in held.message
    assert held.fix is not None
    assert "Sizing a canary" in held.fix
    assert result.verdict == "neutral"


def test_a_failed_evaluation_is_not_judged_and_says_where_to_look(tmp_path: Path) -> None:
    """A run on its own (a pair's head side that failed beside an evaluated base side fails: below)."""
    broken = HeldoutEval(status="failed", message="the evaluator exited with status 1: MemoryError")
    baselines = [separate(tmp_path, "b", evaluation())]
    result = run_compare(separate(tmp_path, "cur", broken), baselines)
    held = check(result, "heldout_eval")
    assert held.status == "skip"
    assert "MemoryError" in held.message
    assert held.fix is not None
    assert "heldout.log" in held.fix
    assert result.verdict == "neutral"


def test_a_config_that_turns_it_off_does_not_apply(tmp_path: Path) -> None:
    off = HeldoutEval(status="skipped", reason="off", message="heldout.enabled is false in the config")
    result = run_compare(pair(tmp_path, off, base_eval=off), [])
    held = check(result, "heldout_eval")
    assert (held.status, held.fix) == ("skip", None)
    assert result.verdict == "pass"


def test_preference_margins_are_judged_with_higher_is_better(tmp_path: Path) -> None:
    base = evaluation(metric="preference", learned=20.0)
    worse = run_compare(pair(tmp_path / "a", evaluation(worse_by=10.0, metric="preference", learned=20.0),
                             base_eval=base), [])  # fmt: skip
    better = run_compare(pair(tmp_path / "b", evaluation(worse_by=-5.0, metric="preference", learned=20.0),
                              base_eval=base), [])  # fmt: skip
    assert check(worse, "heldout_eval").status == "fail"
    assert check(better, "heldout_eval").status == "pass"
    assert worse.heldout is not None
    assert worse.heldout.better == "higher"


def separate(tmp: Path, name: str, evaluation_: HeldoutEval | None) -> Path:
    """A run on its own (push, nightly): the same canary, its own held-out evaluation in metrics.json."""
    metrics = make_metrics(num_steps=STEPS, heldout=evaluation_, workload={"device": "cpu", "dtype": "fp32"})
    metrics = metrics.model_copy(update={"run": metrics.run.model_copy(update={"run_id": name})})
    path = tmp / name / "metrics.json"
    write_metrics(metrics, path)
    return path


def test_separate_runs_are_judged_against_the_baselines_that_evaluated_the_same_examples(tmp_path: Path) -> None:
    baselines = [separate(tmp_path, f"b{i}", evaluation(seed=10 + i)) for i in range(3)]
    same = run_compare(separate(tmp_path, "cur", evaluation(seed=20)), baselines)
    worse = run_compare(separate(tmp_path, "bad", evaluation(worse_by=0.4, seed=21)), baselines)
    assert check(same, "heldout_eval").status == "pass"
    assert same.heldout is not None
    assert same.heldout.basis == "history"
    assert check(worse, "heldout_eval").status == "fail"


def test_baselines_without_the_same_held_out_set_leave_it_unjudged(tmp_path: Path) -> None:
    older = [separate(tmp_path, "old", None)]
    other = [separate(tmp_path, "other", evaluation(fingerprint="0" * 64))]
    for baselines in (older, other):
        held = check(run_compare(separate(tmp_path, "cur", evaluation()), baselines), "heldout_eval")
        assert held.status == "skip"
        assert held.fix is not None
        assert "no baseline evaluated the same held-out examples" in held.message


def test_the_report_says_both_lines_and_draws_both_sides_loss_curves(tmp_path: Path) -> None:
    from canary_action.report.render import render

    result = run_compare(pair(tmp_path, evaluation(worse_by=0.3), loss_shift=0.02, from_step=3), [])
    comment = render(result, "comment")
    assert "🧮 **Numerics**" in comment
    assert "**changed from step 3**" in comment
    assert "🎯 **Held-out loss**" in comment
    assert {c.name for c in result.curves} >= {"pair/loss", "heldout"}
    assert "Loss per step, both sides (red: this PR, dark blue: base)" in render(result, "summary")
    assert 'title "Loss per step, both sides (red: this PR, dark blue: base)"' in comment  # whole: it says the colours
    assert comment.count("xychart-beta") == 4  # step time, the loss band, both sides' losses, the held-out points


@pytest.mark.parametrize(
    ("head", "status", "verdict"),
    [
        # The head side's doing: a snapshot never written or left unreadable, a claim that it never trained (no NaN
        # recorded), an evaluation run out of time. A neutral verdict passes a required check: these fail.
        (HeldoutEval(status="skipped", reason="no_snapshot", message="no snapshot to evaluate"), "fail", "regression"),
        (HeldoutEval(status="failed", message="snapshot step-000040 cannot be read"), "fail", "regression"),
        (
            HeldoutEval(status="skipped", reason="not_trained", message="the run stopped on a non-finite value"),
            "fail",
            "regression",
        ),
        (HeldoutEval(status="failed", message="the evaluator did not finish within 900 s"), "fail", "regression"),
        # Its own figure left instead of snapshots, beside a base side scored from its snapshots (the base trusts
        # context.model, so the head's model could have been rebuilt too).
        (HeldoutEval(status="skipped", reason="own_process", message="its own process"), "fail", "regression"),
        # Not its doing, or not for the gate to blame: unjudged, with the fix (a config change: the publishing job
        # fails it unless a maintainer accepts it).
        (HeldoutEval(status="skipped", reason="not_comparable", message="another model_name"), "skip", "neutral"),
    ],
)
def test_a_head_side_not_evaluated_beside_an_evaluated_base_side(
    head: HeldoutEval, status: str, verdict: str, tmp_path: Path
) -> None:
    result = run_compare(pair(tmp_path, head), [])
    held = check(result, "heldout_eval")
    assert held.status == status, held.message
    assert result.verdict == verdict
    if status == "fail":
        assert "could not be evaluated on held-out data" in held.message
    else:
        assert held.fix is not None


def test_a_head_scored_in_its_own_process_beside_a_base_scored_in_its_own_is_not_judged(tmp_path: Path) -> None:
    """Both sides' models are a trainer_factory's own: neither could be rebuilt, so the head's own figure (its
    code's) is not taken and the check says why, neutral — not the head's doing."""
    base = evaluation().model_copy(update={"evaluated_in": "side_process"})
    head = HeldoutEval(status="skipped", reason="own_process", message="its own process")
    result = run_compare(pair(tmp_path, head, base), [])
    held = check(result, "heldout_eval")
    assert (held.status, result.verdict) == ("skip", "neutral"), held.message
    assert held.fix is not None
    assert "context.model" in held.fix
