"""benchmarks/lockstep.py replays recorded real pairs through the real comparison (docs/benchmarks.md's figures)."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import pytest

from benchmarks import lockstep

DATA = Path(__file__).parents[2] / "benchmarks" / "data" / "lockstep-2026-11-24"


def test_recorded_pairs_replay_paired_and_as_separate_runs(tmp_path: Path) -> None:
    rows = [json.loads(line) for line in (DATA / lockstep.MANIFEST).read_text(encoding="utf-8").splitlines()]
    quiet = [r for r in rows if r["load"] == "quiet"]
    subset = [
        *[r for r in quiet if r["label"] == "aa"][:2],
        next(r for r in quiet if r["label"] == "busy20"),
        next(r for r in rows if r["label"] == "single"),
    ]
    judged = lockstep.judge_all(DATA, subset, lockstep.thresholds_file(tmp_path))
    by_label = {j.label: j for j in judged}
    assert by_label["busy20"].paired_step == "fail"  # +20 % of compute, caught round by round
    assert by_label["busy20"].effect_pct > 10
    assert all(j.paired_verdict != "regression" for j in judged if j.label == "aa")
    assert all(j.old_verdict != "none" for j in judged)  # every head also judged against the other pairs' bases
    calibration = json.loads((DATA / "calibration.json").read_text(encoding="utf-8"))
    text = lockstep.render(judged, subset, calibration, "2026-11-24")
    assert "| quiet | aa | 2 |" in text
    assert "| quiet | busy20 | 1 |" in text
    assert "Wall time, quiet" in text


def test_the_process_spread_is_the_excess_over_the_rounds_error() -> None:
    def judged(effect_pct: float, within: float) -> lockstep.Judged:
        return lockstep.Judged("aa", "quiet", "p", 1.0, effect_pct, within, within, "pass", "pass", "pass", "pass")

    # Effects of exactly their own error: nothing left over. Twice as spread: the excess is sqrt(3) x the error.
    exact = [judged(100 * math.expm1(s * 0.01), 0.01) for s in (1, -1, 1, -1)]
    assert lockstep.process_spread(exact) < 1e-3
    wide = [judged(100 * math.expm1(s * 0.02), 0.01) for s in (1, -1, 1, -1)]
    assert math.isclose(lockstep.process_spread(wide), math.sqrt(3) * 0.01, rel_tol=0.02)
    assert lockstep.expected_false_alarms(wide, fitted=0.0) < lockstep.expected_false_alarms(wide, fitted=0.03)


def test_a_planted_product_is_timed_per_round_on_one_thread() -> None:
    import torch

    from canary_action.train.instrument import PlantedWork

    threads = torch.get_num_threads()
    try:
        times = PlantedWork.timings_s(rounds=3, per_round=20)
        assert len(times) == 3
        assert all(0 < t < 1 for t in times)  # a 256x256 product: well under a millisecond, even loaded under 1 s
        assert torch.get_num_threads() == 1
        assert 0 < lockstep.matmul_s() < 1
    finally:
        torch.set_num_threads(threads)


def test_a_head_tree_is_the_base_tree_plus_the_teams_needless_loop(tmp_path: Path) -> None:
    """The benchmark's slowdowns are team code: a head tree's trainer adds a constant and the loop that uses it,
    and nothing else differs (what a pair's code diff then names)."""
    from canary_action.train.launch.tree_diff import diff_trees

    base = lockstep.make_tree(tmp_path, "base")
    for kind, name in (("loss", "DIAGNOSTIC_REPEATS = 7"), ("collate", "VOCAB_CHECKS = 7")):
        head = lockstep.make_tree(tmp_path, kind, kind, 7)
        [change] = diff_trees(base, head).files
        assert change.path == "team_pipeline/trainer.py"
        assert (change.lines_removed, name in change.added) == (0, True)
    assert 0 < lockstep.unit_s(base, "probe_diagnostic", rounds=2, per_round=5) < 1
    assert 0 < lockstep.unit_s(base, "vocab_check", rounds=2, per_round=5) < 1


def test_the_wait_for_a_cpu_is_what_spreads_pairs_beside_a_hog() -> None:
    """Recorded team DPO pairs (2026-11-28), judged on wall time and less the training thread's wait for a CPU:
    beside the bursty hog the wait is most of the A/A spread; leaving it out keeps every A/A pair passing."""
    data = Path(__file__).parents[2] / "benchmarks" / "data" / "lockstep-aa-2026-11-28" / "team-dpo-1"
    judged = lockstep.judge_timings(data)
    wall, running = "wall time", "time less the wait for a CPU"
    hog_aa = [j[3] for j in judged if j[1] == "hog" and j[2] is None]
    assert len(hog_aa) == 3
    assert max(abs(j[wall][0]) for j in hog_aa) > 10  # one A/A pair read -11.8 % on wall time
    assert max(abs(j[running][0]) for j in hog_aa) < 3
    assert all(j[3][running][1] != "fail" for j in judged if j[2] is None)
    text = lockstep.render_timings([("team-dpo", judged)])
    assert "| team-dpo | hog | 3 |" in text


def test_a_family_trained_longer_changes_its_length_and_nothing_else(tmp_path: Path) -> None:
    from benchmarks import canaries

    for family in canaries.FAMILIES.values():
        longer = family.with_steps(4 * family.steps)
        assert longer.steps == 4 * family.steps
        assert f"max_steps: {4 * family.steps}\n" in longer.config
        assert (
            longer.config.replace(f"max_steps: {4 * family.steps}\n", f"max_steps: {family.steps}\n") == family.config
        )
        assert longer.files == family.files
    broken = canaries.FAMILIES["grpo"]
    with pytest.raises(ValueError, match="no 'max_steps: 40' line"):
        replace(broken, config="name: x\n").with_steps(80)


def test_planted_heads_are_scaled_by_the_effect_one_pair_measured_in_situ(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """size_planted: a 10 % head (by the unit's own time) that measured +6.67 % scales every head by 1.5; the scale
    is held to [0.5, 2] (one pair's noise), and a head that measured nothing gets the largest."""
    from benchmarks import canaries
    from canary_action.compare.stats import Effect

    family = canaries.FAMILIES["grpo"]
    measured: list[float] = []

    def fake_pair(base: Path, head: Path, out: Path, ablation: object = (), options: object = ()) -> tuple[Path, float]:
        assert "VOCAB_CHECKS = 75" in (head / "team_rewards" / "rewards.py").read_text(encoding="utf-8")
        assert tuple(options) == ("--confirm-minutes", "0")  # the sizing pair is not confirmed
        (out / "pair").mkdir(parents=True, exist_ok=True)
        return out / "pair", 1.0

    def fake_effects(pair: Path) -> dict[str, Effect]:
        return {lockstep.GATE: Effect(measured[-1], 0, 0, 0.01, None, 1.0, 30, 1, paired_rounds=30)}

    monkeypatch.setattr(lockstep, "run_pair", fake_pair)
    monkeypatch.setattr(lockstep, "pair_effects", fake_effects)
    base = family.make_tree(tmp_path / "trees", "base")
    for effect, scale in ((6.67, 1.499), (10.45, 0.957), (2.0, 2.0), (-1.0, 2.0), (30.0, 0.5)):
        measured.append(effect)
        sizing = lockstep.size_planted(tmp_path, base, family, 75, ())
        assert sizing["scale"] == scale, (effect, sizing)
        assert (sizing["count"], sizing["nominal_pct"], sizing["pair"]) == (75, 10.0, "sizing/pair")


def test_the_families_table_keys_collections_by_canary_and_length() -> None:
    """Two lengths of one canary are two families: their own rows, fits (marked when too few to fit) and the +5 %
    heads' measured size, with how they were sized."""
    rows = [{"label": "aa", "started": "09:28:00"}, {"label": "slow5", "started": "09:31:00"}]

    def judged(label: str, pair: str, effect: float, step: str, limit: float) -> lockstep.Judged:
        return lockstep.Judged(
            label=label, load="quiet", pair=pair, wall_s=100.0, effect_pct=effect, sd_log=0.015, within_log=0.011,
            paired_verdict="regression" if step == "fail" else "pass", paired_step=step, old_verdict="none",
            old_step="none", paired_limit_pct=limit,
        )  # fmt: skip

    def collection(name: str, steps: int, sized: bool, five: float) -> lockstep.Collected:
        calibration = {"canary": "grpo", "steps": steps, **({"sizing": {"scale": 1.5}} if sized else {})}
        pairs = [judged("aa", "a", -1.0, "pass", 4.5), judged("slow5", "b", five, "fail", 4.0)]
        return lockstep.Collected(Path(name), calibration, rows, pairs, {"a": "", "b": "confirmation"},
                                  {"a": "", "b": ""})  # fmt: skip

    text = lockstep.render_families([collection("grpo-1", 40, False, 7.7), collection("grpo-320", 320, True, 5.9)])
    assert "| grpo (40 steps) | grpo-1 09:28-09:31 | quiet | 1 | 0 | 0 | 0 | 1/1 | — |" in text
    assert "| grpo (320 steps) | grpo-320 09:28-09:31 | quiet | 1 | 0 | 0 | 0 | 1/1 | — |" in text
    assert "grpo (320 steps)" in text.split("Process-level spread")[1]
    assert "(over 1 A/A pairs: too few to fit)" in text
    assert "grpo (40 steps) +7.7 % (sized by the unit's own time" in text
    assert "grpo (320 steps) +5.9 % (sized in situ" in text
