"""A pair's confirming pair, judged from the files (compare/command.py): `canary compare PAIR_DIR` gives the
verdict `canary pair` gave. Real recorded pairs (benchmarks/data/lockstep-2026-11-24): a +20 % head, A/A pairs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from canary_action.compare.command import run_compare
from canary_action.errors import ConfigError

DATA = Path(__file__).parents[2] / "benchmarks" / "data" / "lockstep-2026-11-24"
ROWS = [json.loads(line) for line in (DATA / "manifest.jsonl").read_text(encoding="utf-8").splitlines() if line]
SLOWER = [r["pair"] for r in ROWS if r["label"] == "busy20" and r["load"] == "quiet"]
TEN = [r["pair"] for r in ROWS if r["label"] == "busy10" and r["load"] == "quiet"]
AA = [r["pair"] for r in ROWS if r["label"] == "aa" and r["load"] == "quiet"]


def pair_with(tmp_path: Path, first: str, second: str | None, record: dict[str, object]) -> Path:
    """A copy of the recorded pair `first`, its pair.json naming `record`, and `second` as its confirming pair."""
    pair = tmp_path / "pair"
    shutil.copytree(DATA / first, pair)
    if second is not None:
        shutil.copytree(DATA / second, pair / "confirmation" / "second")
    path = pair / "pair.json"
    path.write_text(json.dumps({**json.loads(path.read_text(encoding="utf-8")), **record}), encoding="utf-8")
    return pair


def step_time(pair: Path) -> tuple[str, str, str]:
    result = run_compare(pair, [])
    check = next(c for c in result.checks if c.name == "step_time")
    return result.verdict, check.status, check.message


def test_a_slowdown_that_a_second_slower_pair_repeats_fails_confirmed(tmp_path: Path) -> None:
    verdict, status, message = step_time(pair_with(tmp_path, SLOWER[0], SLOWER[1], {"confirmation": "second"}))
    assert (verdict, status) == ("regression", "fail")
    assert "; confirmed by a second pair: +" in message


def test_a_real_ten_percent_measured_by_two_pairs_is_a_regression(tmp_path: Path) -> None:
    # Two recorded pairs of the same +10 % head (50 products per step): +11.0 % and +10.2 %.
    verdict, status, message = step_time(pair_with(tmp_path, TEN[0], TEN[1], {"confirmation": "second"}))
    assert (verdict, status) == ("regression", "fail")
    assert message.startswith("+11.0 % [+8.6, +13.4] paired over 50 rounds")
    assert message.endswith("; confirmed by a second pair: +10.2 % [+7.9, +12.6]")


def test_a_slowdown_that_an_equal_second_pair_does_not_repeat_warns(tmp_path: Path) -> None:
    verdict, status, message = step_time(pair_with(tmp_path, SLOWER[0], AA[0], {"confirmation": "second"}))
    assert verdict != "regression"
    assert status == "warn"
    assert message.startswith("not confirmed: the first pair measured +")
    assert "(confirmation/second) measured " in message


@pytest.mark.parametrize(
    ("record", "said"),
    [
        ({"confirmation": "gone"}, "confirmation/gone holds no lockstep pair"),
        ({"confirmation": "second", "code": {"method": "walk", "files": [], "num_files": 0}}, "a pair of other trees"),
        ({"not_confirmed": "the pair took 41.0 min, more than the 30 min cap"}, "more than the 30 min cap"),
    ],
)
def test_without_a_confirming_pair_to_read_the_failure_stands_saying_why(
    tmp_path: Path, record: dict[str, object], said: str
) -> None:
    second = AA[0] if record.get("confirmation") == "second" else None
    verdict, status, message = step_time(pair_with(tmp_path, SLOWER[0], second, record))
    assert (verdict, status) == ("regression", "fail")
    assert "not confirmed by a second pair (" in message
    assert said in message


def test_a_confirmation_name_that_leaves_its_folder_is_refused(tmp_path: Path) -> None:
    from canary_action.errors import MetricsFileError

    with pytest.raises(MetricsFileError, match="not a lockstep pair record"):
        run_compare(pair_with(tmp_path, SLOWER[0], None, {"confirmation": "../../elsewhere"}), [])


class RecordedPairs:
    """run_pair as run_confirmed calls it, answering with copies of recorded pairs: `plan` names the recorded pair
    each call returns (or the exception it raises); `calls` keeps each call's keyword arguments."""

    def __init__(self, out: Path, plan: list[str | BaseException]) -> None:
        self.out, self.plan, self.calls = out, plan, []  # type: list[dict[str, object]]

    def __call__(self, base: Path, head: Path, config: Path, **kwargs: object) -> object:
        from canary_action.metrics.pair import PairRecord
        from canary_action.train.launch.pair import PairOutcome

        self.calls.append(kwargs)
        step = self.plan[len(self.calls) - 1]
        if isinstance(step, BaseException):
            raise step
        parent = kwargs.get("output_dir") or self.out
        assert isinstance(parent, Path)
        pair = parent / f"pair{len(self.calls)}"
        shutil.copytree(DATA / step, pair)
        record = PairRecord.model_validate_json((pair / "pair.json").read_text(encoding="utf-8"))
        return PairOutcome(pair, record, pair / "base" / "metrics.json", pair / "head" / "metrics.json")


def confirmed_run(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, plan: list[str | BaseException], **kw: float):
    from canary_action.train.launch import confirm_pair

    fake = RecordedPairs(tmp_path, plan)
    monkeypatch.setattr("canary_action.train.launch.pair.run_pair", fake)
    outcome = confirm_pair.run_confirmed(Path("base"), Path("head"), Path("canary.yaml"), seed=7, **kw)
    return outcome, fake.calls


def test_a_pass_runs_one_pair(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    outcome, calls = confirmed_run(monkeypatch, tmp_path, [AA[0]])
    assert len(calls) == 1
    assert outcome.record.confirmation is None
    assert outcome.record.not_confirmed is None


def test_a_speed_failure_runs_a_second_pair_of_new_processes_inside_the_first(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    outcome, calls = confirmed_run(monkeypatch, tmp_path, [SLOWER[0], AA[0]], cap_s=600)
    assert len(calls) == 2
    assert calls[1]["output_dir"] == outcome.pair_dir / "confirmation"
    assert calls[1]["max_wall_s"] == 600
    assert "seed" not in calls[1]  # drawn afresh: new orders, new processes
    assert outcome.record.confirmation == "pair2"
    written = json.loads((outcome.pair_dir / "pair.json").read_text(encoding="utf-8"))
    assert written["confirmation"] == "pair2"
    assert step_time(outcome.pair_dir)[1] == "warn"  # the second pair passed: not confirmed


@pytest.mark.parametrize(
    ("plan", "cap", "said"),
    [
        ([SLOWER[0]], 0.0, "confirmation turned off"),
        ([SLOWER[0]], 1.0, "more than the confirming pair's cap of 0.0 min"),
        ([SLOWER[0], ConfigError("canary.yaml: unknown key")], 600.0, "could not run: canary.yaml: unknown key"),
    ],
)
def test_a_failure_that_cannot_be_confirmed_says_why_and_stands(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, plan: list[str | BaseException], cap: float, said: str
) -> None:
    outcome, _ = confirmed_run(monkeypatch, tmp_path, plan, cap_s=cap)
    assert outcome.record.not_confirmed is not None
    assert said in outcome.record.not_confirmed
    verdict, status, message = step_time(outcome.pair_dir)
    assert (verdict, status) == ("regression", "fail")
    assert message.endswith(f"; not confirmed by a second pair ({outcome.record.not_confirmed})")


def test_an_interrupted_confirmation_is_recorded_before_the_interrupt_goes_on(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    with pytest.raises(KeyboardInterrupt):
        confirmed_run(monkeypatch, tmp_path, [SLOWER[0], KeyboardInterrupt()])
    written = json.loads((tmp_path / "pair1" / "pair.json").read_text(encoding="utf-8"))
    assert written["not_confirmed"] == "the confirming pair was interrupted"
