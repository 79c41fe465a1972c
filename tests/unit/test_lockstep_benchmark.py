"""benchmarks/lockstep.py replays recorded real pairs through the real comparison (docs/benchmarks.md's figures)."""

from __future__ import annotations

import json
import math
from pathlib import Path

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
