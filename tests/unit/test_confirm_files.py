"""A pair's confirming pair, judged from the files (compare/command.py): `canary compare PAIR_DIR` gives the
verdict `canary pair` gave. Real recorded pairs (benchmarks/data/lockstep-2026-11-24): a +20 % head, A/A pairs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from canary_action.compare.command import run_compare

DATA = Path(__file__).parents[2] / "benchmarks" / "data" / "lockstep-2026-11-24"
ROWS = [json.loads(line) for line in (DATA / "manifest.jsonl").read_text(encoding="utf-8").splitlines() if line]
SLOWER = [r["pair"] for r in ROWS if r["label"] == "busy20" and r["load"] == "quiet"]
TEN = [r["pair"] for r in ROWS if r["label"] == "busy10" and r["load"] == "quiet"]
AA = [r["pair"] for r in ROWS if r["label"] == "aa" and r["load"] == "quiet"]


def pair_with(tmp_path: Path, first: str, second: str | None, record: dict[str, str]) -> Path:
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
    assert message.startswith("+11.0 % [+9.6, +12.4] paired over 50 rounds")
    assert message.endswith("; confirmed by a second pair: +10.2 % [+8.9, +11.6]")


def test_a_slowdown_that_an_equal_second_pair_does_not_repeat_warns(tmp_path: Path) -> None:
    verdict, status, message = step_time(pair_with(tmp_path, SLOWER[0], AA[0], {"confirmation": "second"}))
    assert verdict != "regression"
    assert status == "warn"
    assert message.startswith("not confirmed: the first pair measured +")
    assert "(confirmation/second) measured " in message


@pytest.mark.parametrize(
    ("record", "said"),
    [
        ({"confirmation": "gone"}, "the confirming pair confirmation/gone cannot be judged"),
        ({"not_confirmed": "the pair took 41.0 min, more than the 30 min cap"}, "more than the 30 min cap"),
    ],
)
def test_without_a_confirming_pair_to_read_the_failure_stands_saying_why(
    tmp_path: Path, record: dict[str, str], said: str
) -> None:
    verdict, status, message = step_time(pair_with(tmp_path, SLOWER[0], None, record))
    assert (verdict, status) == ("regression", "fail")
    assert "not confirmed by a second pair (" in message
    assert said in message


def test_a_confirmation_name_that_leaves_its_folder_is_refused(tmp_path: Path) -> None:
    from canary_action.errors import MetricsFileError

    with pytest.raises(MetricsFileError, match="not a lockstep pair record"):
        run_compare(pair_with(tmp_path, SLOWER[0], None, {"confirmation": "../../elsewhere"}), [])
