"""The detection benchmark's harness (benchmarks/detection.py) on tiny trial counts: its rules behave as designed.

The figures themselves live in docs/benchmarks.md; these only check that the harness is sane.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from benchmarks import detection, noise_fit, real_runs
from canary_action.compare import stats
from canary_action.compare.stats import Sample, compare_levels, prior_ratio

GPU = detection.Regime.from_json("dedicated-gpu", detection.GPU_REGIME)
# A noise-bound regime: the oracle's z x SD limit is far above a 1 % threshold, so its A/A rate is its design 1 %.
NOISY = detection.Regime(
    "noisy", "noisy", device="cpu", tau=0.1, content_sd=0.05, indep_sd=0.1, rho=0.3, t_df=8.0, mem_jitter=None
)


def test_oracle_false_alarms_match_its_design_where_the_noise_binds() -> None:
    spec = detection.TierSpec("smoke", 20, 1.0, 1000, 20)
    cell = detection.run_cell(NOISY, spec, 1, 20_000, 0, rng=np.random.default_rng(1), effects=(0.0,), with_gate=False)
    assert math.log1p(0.01) < detection.Z99 * cell.oracle_sd
    # 1 % by design; the binomial SD at 20000 draws is 0.07 points, the oracle's SD estimate adds a little.
    assert cell.rates["oracle"][0.0] == pytest.approx(0.01, abs=0.003)


def test_a_large_slowdown_is_always_caught_in_the_dedicated_gpu_regime() -> None:
    cell = detection.run_cell(GPU, detection.tier("smoke"), 5, 40, 40, rng=np.random.default_rng(2), effects=(0.0, 0.5))
    for rule in ("gate", "old", "oracle"):
        assert cell.rates[rule][0.5] == 1.0
        assert cell.rates[rule][0.0] == 0.0
    assert cell.mismatches == 0
    # The critical effects agree with the real gate calls (mismatches) and place every trial below +50 %.
    assert np.all(cell.critical["gate"] < 0.5)
    assert cell.mem_rates["gate"][0.10] == 1.0
    assert cell.mem_rates["gate"][0.0] == 0.0


def test_effects_move_only_the_difference() -> None:
    """The critical-effect derivation rests on this: scaling the current run changes delta, nothing else."""
    rng = np.random.default_rng(3)
    times = np.exp(detection.generate_log_times(NOISY, 60, 3, 1, rng))[0]
    baselines = [Sample.of(r.tolist()) for r in times[1:]]
    plain = compare_levels(Sample.of(times[0].tolist()), baselines, ratio=0.6)
    slowed = compare_levels(Sample.of((times[0] * 1.2).tolist()), baselines, ratio=0.6)
    assert slowed.sd_log == pytest.approx(plain.sd_log, rel=1e-12)
    assert math.log1p(slowed.delta_pct / 100) == pytest.approx(math.log1p(plain.delta_pct / 100) + math.log(1.2))


def test_generated_noise_has_the_regime_parameters() -> None:
    logs = detection.generate_log_times(NOISY, 400, 2, 300, np.random.default_rng(4))
    within = logs - logs.mean(axis=2, keepdims=True)
    assert within.std() == pytest.approx(NOISY.step_sd, rel=0.05)
    own = within[:, 0] - within[:, 1]  # the shared content cancels between runs of one comparison
    lag1 = np.mean(own[:, 1:] * own[:, :-1]) / np.mean(own**2)
    assert lag1 == pytest.approx(NOISY.rho, abs=0.03)
    assert np.std(logs[:, :, :].mean(axis=2)[:, 0]) == pytest.approx(NOISY.tau, rel=0.15)


@pytest.mark.parametrize(("device", "expected"), [("cpu", 1.7), ("cuda:0", 0.6), ("mps", 1.7)])
def test_the_gate_gets_its_devices_prior_ratio_as_the_check_does(
    monkeypatch: pytest.MonkeyPatch, device: str, expected: float
) -> None:
    seen: set[float] = set()

    def spy(current: Sample, baselines: list[Sample], *, ratio: float) -> stats.Effect:
        seen.add(ratio)
        return compare_levels(current, baselines, ratio=ratio)

    monkeypatch.setattr(detection, "compare_levels", spy)
    regime = detection.Regime("r", "r", device, 0.05, 0.0, 0.05, 0.3, None, None)
    detection.run_cell(regime, detection.tier("smoke"), 1, 4, 2, rng=np.random.default_rng(6), effects=(0.0, 0.1))
    assert seen == {prior_ratio(device)}
    assert seen == {expected}
    with detection.gate_constants(0.9):  # exploration: one ratio for every device kind, restored afterwards
        seen.clear()
        detection.run_cell(regime, detection.tier("smoke"), 1, 2, 0, rng=np.random.default_rng(6), effects=(0.0,))
        assert seen == {0.9}
        assert set(stats.PRIOR_RATIO.values()) == {0.9}
    assert stats.PRIOR_RATIO == {"cpu": 1.7, "cuda": 0.6}


def test_a_cpu_regime_has_no_memory_to_judge() -> None:
    cell = detection.run_cell(NOISY, detection.tier("smoke"), 1, 4, 2, rng=np.random.default_rng(7))
    assert cell.mem_rates is None
    row = detection.render_table([cell], {}).splitlines()[2]
    assert [c.strip() for c in row.strip("|").split("|")][-3:] == ["n/a"] * 3


def test_fit_recovers_a_simulated_regime(tmp_path: Path) -> None:
    truth = detection.Regime(
        "t", "t", "cpu", tau=0.1, content_sd=0.05, indep_sd=0.08, rho=0.3, t_df=None, mem_jitter=None
    )
    times = np.exp(detection.generate_log_times(truth, 200, 12, 1, np.random.default_rng(8)))[0]
    runs = [noise_fit.RealRun(tmp_path, list(range(200)), t.tolist()) for t in times]
    fitted = noise_fit.fit_regime(runs, tmp_path)
    assert (fitted["device"], fitted["mem_jitter"]) == ("cpu", None)
    assert fitted["content_sd"] == pytest.approx(truth.content_sd, rel=0.2)
    assert fitted["indep_sd"] == pytest.approx(truth.indep_sd, rel=0.2)
    assert fitted["rho"] == pytest.approx(truth.rho, abs=0.1)
    assert fitted["tau"] == pytest.approx(truth.tau, rel=0.5)  # 12 runs: one SD of 12 draws


def test_table_has_the_expected_columns(tmp_path: Path) -> None:
    cell = detection.run_cell(GPU, detection.tier("smoke"), 1, 10, 5, rng=np.random.default_rng(5))
    table = detection.render_table([cell], {"dedicated-gpu": "(ii)"})
    header, rule, row = table.splitlines()
    columns = [c.strip() for c in header.strip("|").split("|")]
    assert columns == [
        "regime", "tier (steps, threshold)", "baselines", "A/A false alarms", "+3 %", "+5 %", "+10 %", "+20 %",
        "memory A/A", "memory +5 %", "memory +10 %",
    ]  # fmt: skip
    assert rule.count("---") == len(columns)
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert len(cells) == len(columns)
    assert cells[:3] == ["(ii)", "smoke (100, 15 %)", "1"]
    assert all(c.count(" / ") == 2 for c in cells[3:8])  # gate / old / oracle
    assert all(c.count(" / ") == 1 for c in cells[8:])  # gate / old
    docs = tmp_path / "benchmarks.md"
    docs.write_text(f"# B\n\nbefore\n\n{detection.DOCS_BEGIN}\nold\n{detection.DOCS_END}\n\nafter\n")
    detection.write_docs(table, docs)
    assert docs.read_text() == f"# B\n\nbefore\n\n{detection.DOCS_BEGIN}\n{table}\n{detection.DOCS_END}\n\nafter\n"


def test_regimes_file_has_both_regimes() -> None:
    params = json.loads((detection.REPO / "benchmarks" / "noise_regimes.json").read_text())
    regimes = detection.load_regimes(detection.REPO / "benchmarks" / "noise_regimes.json")
    assert [r.name for r in regimes] == ["shared-cpu", "dedicated-gpu"]
    assert [(r.device, prior_ratio(r.device)) for r in regimes] == [("cpu", 1.7), ("cuda", 0.6)]
    assert regimes[0].mem_jitter is None  # CPU runs record no CUDA memory
    assert params["regimes"]["shared-cpu"]["fit"]["runs"] >= 12
    gpu = next(r for r in regimes if r.name == "dedicated-gpu")
    assert (gpu.tau, gpu.step_sd, gpu.rho) == (0.01, 0.04, 0.3)


REAL_RUNS = Path(__file__).parents[2] / "benchmarks" / "data" / "real-runs-2026-11-24"


def test_the_recorded_real_runs_replay_through_the_real_compare() -> None:
    runs = real_runs.read_collected(REAL_RUNS)
    plain = [c for c in runs if c.plain]
    assert len(plain) >= 16
    assert all(sum(c.row["label"] == label for c in runs) >= 6 for label in ("slow10", "slow20", "slow50"))
    effects = real_runs.measured_effects(runs)
    assert effects["slow50"] > effects["slow10"] > 0  # the planted slowdowns are really there, in order
    subset = [*plain[:3], *(next(c for c in runs if c.row["label"] == lab) for lab in ("slow10", "slow20", "slow50"))]
    cells = real_runs.replay(subset, sets=1, seed=0)
    assert len(cells) == len(real_runs.REPLAY_TIERS) * 4  # 3 plain runs: one baseline only; 4 labels
    assert {c.label for c in cells} == {"A/A", "slow10", "slow20", "slow50"}
