"""canary bisect's runner over a real git repository, with the pair replaced by a stand-in that reads the
commit's own tree: each commit's `speed.txt` is its step-time effect against the good commit. What is real: the
history, the worktrees (a wrong checkout measures the wrong number), skips, bisect.json and Ctrl-C."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import pytest

from canary_action.bisect import runner
from canary_action.bisect.result import BisectResult
from canary_action.compare.result import Check, Interval
from canary_action.errors import ConfigError, TrainingError, UsageError
from tests.factories import NO_HELDOUT_YAML

GIT_ENV = {
    "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.com", "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1",
}  # fmt: skip


SFT = (Path(__file__).parents[2] / "configs" / "tiny" / "sft.yaml").read_text(encoding="utf-8") + NO_HELDOUT_YAML


def history(repo: Path, speeds: list[str], config: str | None = SFT) -> list[str]:
    """A commit per entry: speed.txt holds it (a number, or `broken`, `crash`, `goodfail`, `interrupt`: how its pair
    fails), beside canary.yaml."""
    env = {**os.environ, **GIT_ENV}
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=repo, check=True)
    if config is not None:
        (repo / "canary.yaml").write_text(config, encoding="utf-8")
    shas = []
    for number, speed in enumerate(speeds):
        (repo / "speed.txt").write_text(speed, encoding="utf-8")
        subprocess.run(["git", "add", "-A"], cwd=repo, env=env, check=True)
        subprocess.run(
            ["git", "commit", "-q", "--allow-empty", "-m", f"commit {number}"], cwd=repo, env=env, check=True
        )
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True, check=True)
        shas.append(head.stdout.strip())
    return shas


@dataclass
class StandIn:
    """run_pair and judge_pair as the runner calls them; `trees` records each head tree's speed.txt."""

    out: Path
    trees: list[str] = field(default_factory=list)

    def run_pair(self, base: Path, head: Path, config: Path, **_: object) -> SimpleNamespace:
        speed = (head / "speed.txt").read_text(encoding="utf-8")
        assert (base / "speed.txt").read_text(encoding="utf-8") == "0"  # the good commit's tree
        self.trees.append(speed)
        if speed == "interrupt":
            raise KeyboardInterrupt
        if speed == "broken":
            raise ConfigError("canary.yaml: unknown key `lerning_rate`")
        pair_dir = self.out / f"pair{len(self.trees)}"
        pair_dir.mkdir(parents=True)
        (pair_dir / "metrics.json").write_text("{}", encoding="utf-8")
        error = TrainingError("the head side crashed") if speed == "crash" else None
        base = pair_dir / ("missing.json" if speed == "goodfail" else "metrics.json")  # the good side wrote nothing
        return SimpleNamespace(pair_dir=pair_dir, base=base, head=pair_dir / "metrics.json",
                               error=error, notes=[], speed=float(speed) if speed[0].isdigit() else 0.0)  # fmt: skip

    @staticmethod
    def judge_pair(outcome: SimpleNamespace, **_: object) -> SimpleNamespace:
        pct = outcome.speed
        check = Check(name="step_time", group="perf", status="fail" if pct > 3 else "pass", unit="s", delta_pct=pct,
                      interval=Interval(low=pct - 2, high=pct + 2), message="")  # fmt: skip
        verdict = "regression" if pct > 3 else "pass"
        return SimpleNamespace(checks=[check], verdict=verdict, reason=f"step_time {pct:+.1f} %")


@pytest.fixture
def stand_in(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> StandIn:
    fake = StandIn(tmp_path / "pairs")
    monkeypatch.setattr("canary_action.train.launch.pair.run_pair", fake.run_pair)
    monkeypatch.setattr("canary_action.compare.pair_judge.judge_pair", fake.judge_pair)
    return fake


def bisect(repo: Path, shas: list[str], out: Path) -> BisectResult:
    plan = runner.BisectPlan(config=Path("canary.yaml"))
    return runner.run_bisect(repo, shas[0], shas[-1], out, plan, say=lambda _: None)


def test_each_commit_is_measured_from_its_own_checkout_and_the_culprit_named(stand_in: StandIn, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    shas = history(repo, ["0", "0", "0", "0", "0", "15", "15", "15", "15"])
    result = bisect(repo, shas, tmp_path / "out")
    assert stand_in.trees == ["15", "0", "15", "15"]  # commits 8 (bad), 4, 6, 5: read from each one's checkout
    assert result.status == "found"
    (finding,) = result.findings
    assert finding.commits[0].sha == shas[5]
    assert [(s.commit.index, s.call) for s in result.steps] == [
        (8, "confirm"),
        (4, "before"),
        (6, "after"),
        (5, "after"),
    ]
    assert result.pairs == len(stand_in.trees) <= result.max_pairs
    assert BisectResult.model_validate_json((tmp_path / "out" / "bisect.json").read_text(encoding="utf-8")) == result


def test_a_commit_that_cannot_be_measured_is_reported_with_why(stand_in: StandIn, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    shas = history(repo, ["0", "0", "broken", "crash", "15"])
    result = bisect(repo, shas, tmp_path / "out")
    skipped = {s.commit.sha: s.why for s in result.steps if s.call == "skipped"}
    assert skipped[shas[2]] == "invalid canary config: canary.yaml: unknown key `lerning_rate`"
    assert "the head side crashed" in skipped[shas[3]]
    (finding,) = result.findings
    assert [c.sha for c in finding.commits] == shas[2:]
    assert result.status == "not-clear"


def test_no_failing_check_is_not_confirmed_and_searches_nothing(stand_in: StandIn, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    shas = history(repo, ["0", "0", "1"])
    result = bisect(repo, shas, tmp_path / "out")
    assert result.status == "not-confirmed"
    assert stand_in.trees == ["1"]
    assert result.summary.startswith("not confirmed: in a pair of the bad commit against the good one")


def test_a_bad_commit_that_cannot_train_is_an_error_naming_it(stand_in: StandIn, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    shas = history(repo, ["0", "15", "crash"])
    with pytest.raises(TrainingError, match=f"the pair of the bad commit {shas[-1][:10]} against the good one did"):
        bisect(repo, shas, tmp_path / "out")


def test_a_good_commit_without_a_loadable_config_is_bad_input(stand_in: StandIn, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    shas = history(repo, ["0", "15"], config=SFT + "lerning_rate: 1\n")
    with pytest.raises(ConfigError, match=f"at the good commit {shas[0][:10]}: "):
        bisect(repo, shas, tmp_path / "out")
    other = tmp_path / "other"
    other.mkdir()
    shas = history(other, ["0", "15"], config=None)
    with pytest.raises(UsageError, match=f"the good commit {shas[0][:10]} has no canary.yaml"):
        bisect(other, shas, tmp_path / "out")
    assert stand_in.trees == []  # refused before any pair


def test_ctrl_c_keeps_the_pairs_measured_and_removes_the_checkouts(stand_in: StandIn, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    shas = history(repo, ["0", "0", "interrupt", "15", "15"])
    with pytest.raises(KeyboardInterrupt):
        bisect(repo, shas, tmp_path / "out")
    kept = BisectResult.model_validate_json((tmp_path / "out" / "bisect.json").read_text(encoding="utf-8"))
    assert kept.status == "interrupted"
    assert [s.call for s in kept.steps] == ["confirm"]
    assert kept.steps[0].effect is not None
    worktrees = subprocess.run(["git", "worktree", "list"], cwd=repo, capture_output=True, text=True, check=True)
    assert len(worktrees.stdout.splitlines()) == 1


def test_a_good_side_that_stops_training_ends_the_bisect_and_keeps_what_was_measured(
    stand_in: StandIn, tmp_path: Path
) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    shas = history(repo, ["0", "0", "goodfail", "15", "15"])
    with pytest.raises(TrainingError, match="the good commit did not train in pair"):
        bisect(repo, shas, tmp_path / "out")
    kept = BisectResult.model_validate_json((tmp_path / "out" / "bisect.json").read_text(encoding="utf-8"))
    assert kept.status == "failed"
    assert kept.summary.startswith("stopped: the good commit did not train")
    assert [s.call for s in kept.steps] == ["confirm"]


def test_a_good_commit_off_the_bad_commits_first_parent_line_is_refused(tmp_path: Path) -> None:
    # good is on a branch merged into main: `git log --first-parent good..bad` would list main's commits from
    # before the merge, which hold none of good's code.
    env = {**os.environ, **GIT_ENV}
    repo = tmp_path / "repo"
    repo.mkdir()
    shas = history(repo, ["0", "0"])

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True, text=True).stdout

    git("checkout", "-q", "-b", "side", shas[0])
    git("commit", "-q", "--allow-empty", "-m", "side work")
    side = git("rev-parse", "HEAD").strip()
    git("checkout", "-q", "main")
    git("merge", "-q", "--no-ff", "-m", "merge side", "side")
    merge = git("rev-parse", "HEAD").strip()
    with pytest.raises(UsageError, match=f"--good {side[:10]} is not on the first-parent history of --bad"):
        runner.run_bisect(repo, side, merge, tmp_path / "out", runner.BisectPlan(config=Path("canary.yaml")))


def check(name: str, status: str, pct: float, interval: tuple[float, float] | None) -> Check:
    bounds = Interval(low=interval[0], high=interval[1]) if interval else None
    return Check(name=name, group="perf", status=status, unit="%", delta_pct=pct, interval=bounds, message="")


def test_the_followed_check_fails_or_is_clear_and_has_an_interval() -> None:
    memory = check("max_memory", "fail", 30.0, None)  # a point: it cannot be placed between two levels
    warned = check("step_time", "warn", 12.0, (6.0, 18.0))  # clear, under the gate's raised limit
    unclear = check("tokens_per_sec", "warn", -12.0, (-25.0, 1.0))
    result = SimpleNamespace(checks=[memory, unclear, warned])
    assert runner._followed(result, None) == warned  # type: ignore[arg-type]
    assert runner._followed(SimpleNamespace(checks=[memory, unclear]), None) is None  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="--check 'step_tim' is not a check of this comparison"):
        runner._followed(result, "step_tim")  # type: ignore[arg-type]


def test_a_failure_its_second_pair_did_not_find_again_is_not_searched_for() -> None:
    """A clear warning is followed (the user knows it regressed), but not one that a confirming pair turned from a
    failure into a warning: that was a slow process, and a search would end at BAD whatever happened."""
    clear = Interval(low=9.0, high=15.0)
    unconfirmed = Check(name="step_time", group="perf", status="warn", unit="s", delta_pct=12.0, interval=clear,
                        message="not confirmed: the first pair measured +12.0 % ...")  # fmt: skip
    warned = unconfirmed.model_copy(update={"message": "+12.0 % [+9.0, +15.0] — within the raised limit"})
    assert runner._followed(SimpleNamespace(checks=[unconfirmed]), None) is None  # type: ignore[arg-type]
    assert runner._followed(SimpleNamespace(checks=[warned]), None) == warned  # type: ignore[arg-type]
