"""Confirm before failing (compare/confirm.py): which failures a second pair confirms, and how both are said."""

from __future__ import annotations

from canary_action.compare.confirm import confirmed
from canary_action.compare.result import Check, Interval
from canary_action.compare.slow_process import mechanisms


def step(status: str, pct: float, low: float, high: float, name: str = "step_time") -> Check:
    return Check(name=name, group="perf", status=status, unit="s", delta_pct=pct,  # type: ignore[arg-type]
                 interval=Interval(low=low, high=high), message=f"{pct:+.1f} % measured")  # fmt: skip


def test_a_failure_the_second_pair_repeats_stays_a_failure_and_says_so() -> None:
    [check] = confirmed([step("fail", 10.2, 8.9, 11.5)], [step("fail", 9.4, 8.0, 10.8)], "confirmation/p2", None)
    assert check.status == "fail"
    assert check.message == "+10.2 % measured; confirmed by a second pair: +9.4 % [+8.0, +10.8]"


def test_a_failure_the_second_pair_does_not_repeat_warns_with_both_effects() -> None:
    [check] = confirmed([step("fail", 13.6, 12.0, 15.3)], [step("pass", 0.4, -0.9, 1.7)], "confirmation/p2", None)
    assert check.status == "warn"
    assert check.message.startswith(
        "not confirmed: the first pair measured +13.6 % [+12.0, +15.3], a second pair of fresh processes "
        "(confirmation/p2) measured +0.4 % [-0.9, +1.7] (pass)"
    )


def test_two_failures_that_differ_in_size_still_fail_and_say_so() -> None:
    # A +300 % slowdown measured twice under load: +330 % and +250 %, intervals apart. Still slower code.
    [check] = confirmed([step("fail", 330.0, 300.0, 360.0)], [step("fail", 250.0, 230.0, 270.0)], "c/p2", None)
    assert check.status == "fail"
    assert check.message.endswith(
        "confirmed by a second pair: +250.0 % [+230.0, +270.0] (the two pairs differ in its size: their intervals do "
        "not overlap)"
    )


def test_a_second_pair_clearly_worse_by_the_same_size_confirms_under_its_own_raised_limit() -> None:
    # +5 % measured twice: the second pair's noise raised its limit past its effect (a warning alone), but its
    # interval is clear of zero and overlaps the first's: the change is real.
    [check] = confirmed([step("fail", 5.3, 3.6, 7.0)], [step("warn", 4.6, 1.8, 7.5)], "c/p2", None)
    assert check.status == "fail"
    assert check.message.endswith(
        "confirmed by a second pair: +4.6 % [+1.8, +7.5], clearly worse and of the same size (under the limit its "
        "own noise raised it to)"
    )
    # A slow process's first pair, then a second pair a little worse but far from its size: not confirmed.
    [check] = confirmed([step("fail", 13.6, 12.0, 15.3)], [step("warn", 2.0, 0.5, 3.5)], "c/p2", None)
    assert check.status == "warn"
    # A drop (tokens/s): clearly worse is below zero.
    [check] = confirmed([step("fail", -6.0, -8.0, -4.0, "tokens_per_sec")],
                        [step("warn", -5.0, -7.5, -2.5, "tokens_per_sec")], "c/p2", None)  # fmt: skip
    assert check.status == "fail"


def test_a_passing_second_pair_never_confirms_even_when_clear_and_overlapping() -> None:
    # A small steady bias, clear but under the minimum effect: a pass, which answers "not this large".
    [check] = confirmed([step("fail", 3.6, 0.3, 6.9)], [step("pass", 0.8, 0.1, 1.5)], "c/p2", None)
    assert check.status == "warn"


def test_a_second_pair_that_did_not_judge_the_check_confirms_nothing_and_the_failure_stands() -> None:
    skipped = Check(name="step_time", group="perf", status="skip", unit="s", message="the base side was stalled")
    for second in ([skipped], []):
        [check] = confirmed([step("fail", 9.0, 7.0, 11.0)], second, "confirmation/p2", None)
        assert check.status == "fail"
        assert "; not confirmed by a second pair (the confirming pair confirmation/p2 did not judge it" in check.message


def test_without_a_second_pair_the_failure_stands_saying_why() -> None:
    [check] = confirmed([step("fail", 10.0, 8.0, 12.0)], None, "", "the pair took 41.0 min, more than the 30 min cap")
    assert check.status == "fail"
    assert check.message.endswith("; not confirmed by a second pair (the pair took 41.0 min, more than the 30 min cap)")


def test_only_failed_speed_checks_are_confirmed() -> None:
    memory = step("fail", 40.0, 35.0, 45.0, name="max_memory")
    passed = step("pass", 1.0, -1.0, 3.0)
    checks = confirmed([memory, passed], [step("pass", 0.0, -1.0, 1.0)], "confirmation/p2", None)
    assert checks == [memory, passed]


def test_a_process_mechanism_is_named_where_it_accounts_for_the_difference() -> None:
    base = {"step_time_s": 0.030, "cpu_s": 0.026, "system_cpu_s": 0.0, "minor_faults": 1.0, "major_faults": 0.0,
            "involuntary_switches": 3.0, "runqueue_wait_s": 0.0}  # fmt: skip
    fresh_memory = {**base, "step_time_s": 0.052, "cpu_s": 0.047, "system_cpu_s": 0.020, "minor_faults": 4097.0}
    assert mechanisms(fresh_memory, base) == [
        "system CPU 0.020 s per step against 0.000 s",
        "minor page faults 4,097 per step against 1",
    ]
    starved = {**base, "step_time_s": 0.045, "runqueue_wait_s": 0.014, "involuntary_switches": 12.0}
    assert mechanisms(starved, base) == [
        "run-queue wait 0.014 s per step against 0.000 s",
        "involuntary switches 12 per step against 3",
    ]
    # Slower code that also waited a little more for its CPU: the wait explains too little of it to be named.
    slower = {**base, "step_time_s": 0.060, "cpu_s": 0.056, "runqueue_wait_s": 0.004, "involuntary_switches": 19.0}
    assert mechanisms(slower, base) == []
    assert mechanisms(base, base) == []
