"""What a lockstep pair says beside its verdict: how many rounds it trained and how many were judged (one count
must not read as contradicting the other), and where a failed side's traceback is."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

from canary_action.compare.pair_judge import pair_note
from canary_action.metrics.pair import PairRecord, Round, SideEnd
from canary_action.report.render import render
from canary_action.report.terminal import render_terminal
from canary_action.train.launch.pair import _Side, _side_error
from tests.unit.test_paired import PAIR, judge, make_pair


def record(rounds: int) -> PairRecord:
    end = SideEnd(tree="/t", config_path="/t/c.yaml", metrics_path="x/metrics.json", exit_code=0, steps=2 * rounds)
    return PairRecord(
        pair_id=PAIR, chunk_steps=2, seed=1, started_at="2026-11-24T15:00:00Z", finished_at="2026-11-24T15:00:44Z",
        wall_s=44.2, rounds=[Round(index=i, order=["base", "head"]) for i in range(rounds)], base=end, head=end,
    )  # fmt: skip


def test_the_note_and_the_paired_line_each_say_what_they_count(tmp_path: Path) -> None:
    result = judge(*make_pair(tmp_path, steps=120))  # 60 rounds of 2 steps
    assert result.pairing is not None
    judged = result.pairing.rounds
    assert judged is not None
    note = pair_note(record(60), result)
    assert note == (
        f"lockstep pair {PAIR}: 60 rounds of 2 steps in all (warm-up included), 44 s; {judged} of them judged for "
        "speed, after the warm-up"
    )
    line = f"took turns, 2 steps at a time — {judged} rounds judged, after the warm-up"
    assert line in render(result, "markdown")
    assert line in render_terminal(result)


def test_a_pair_too_short_to_judge_says_so_in_its_note(tmp_path: Path) -> None:
    result = judge(*make_pair(tmp_path, steps=12))
    assert result.pairing is not None
    assert result.pairing.rounds is None
    assert pair_note(record(6), result).endswith(
        "6 rounds of 2 steps in all (warm-up included), 44 s; too few rounds after the warm-up to judge speed"
    )
    assert "too few rounds after the warm-up to judge speed" in render_terminal(result)


def side(tmp_path: Path, exit_code: int) -> _Side:
    run_dir = tmp_path / "pair" / "head"
    run_dir.mkdir(parents=True)
    failed = _Side(name="head", tree=tmp_path, config_path=tmp_path / "c.yaml", loaded=None, run_dir=run_dir)  # type: ignore[arg-type]
    failed.process = SimpleNamespace(returncode=exit_code)  # type: ignore[assignment]  # all _side_error reads
    return failed


def test_a_side_that_never_started_points_at_the_output_not_a_missing_log(tmp_path: Path) -> None:
    """Its interpreter, or canary_action itself, did not import: no metrics.json, no error.log."""
    error = _side_error(side(tmp_path, 1), tmp_path / "pair")
    assert error is not None
    assert error.message.endswith("failed during start: exit status 1")
    assert error.fix is not None
    assert "error.log" not in error.fix
    assert error.fix.startswith("read the head side's lines in the output above")


def test_an_error_log_that_is_a_link_is_never_read_as_the_sides_error(tmp_path: Path) -> None:
    """A head side that deleted its metrics.json and left error.log as a link to /proc/self/environ made the
    coordinator read its own environment (the token, in mode run) as root and publish it as the error."""
    failed = side(tmp_path, 1)
    environ = tmp_path / "environ"
    environ.write_text("INPUT_GITHUB-TOKEN=ghs_secret\n", encoding="utf-8")
    (failed.run_dir / "error.log").symlink_to(environ)
    error = _side_error(failed, tmp_path / "pair")
    assert error is not None
    assert "ghs_secret" not in error.message + (error.fix or "")
    assert error.message.endswith("failed during start: exit status 1")


def test_a_side_that_failed_at_start_names_its_error_and_its_log(tmp_path: Path) -> None:
    failed = side(tmp_path, 1)
    log = failed.run_dir / "error.log"
    log.write_text("Traceback (most recent call last):\n  ...\nImportError: planted\n\n", encoding="utf-8")
    error = _side_error(failed, tmp_path / "pair")
    assert error is not None
    assert error.message.endswith("failed during start: ImportError: planted")
    assert error.fix is not None
    assert error.fix.startswith(f"read the traceback in {log};")


THREADS = """
import threading, time
for _ in range(3):
    threading.Thread(target=time.sleep, args=(30,), daemon=True).start()
print("ready", flush=True)
time.sleep(30)
"""


def test_pinning_a_side_pins_every_thread_it_already_has() -> None:
    """A side is pinned after it loaded its model, when torch and the tokenizers have started threads: affinity is
    per thread on Linux, so each of them is pinned, not only the main one."""
    import os
    import subprocess
    import sys

    from canary_action.train.launch.pair import pin_process

    with subprocess.Popen([sys.executable, "-c", THREADS], stdout=subprocess.PIPE, text=True) as child:
        try:
            assert child.stdout is not None
            assert child.stdout.readline().strip() == "ready"
            one = {min(os.sched_getaffinity(0))}
            pin_process(child.pid, one)
            tasks = list(Path(f"/proc/{child.pid}/task").iterdir())
            assert len(tasks) == 4
            assert all(os.sched_getaffinity(int(t.name)) == one for t in tasks)
        finally:
            child.kill()


def test_a_side_says_where_it_trains_with_its_first_wait(tmp_path: Path) -> None:
    """Only CPU sides are pinned: a GPU side's host work (launches, the driver's threads) keeps every core."""
    import io
    import time

    from canary_action.train.launch.pair import _await

    side = _Side(name="head", tree=tmp_path, config_path=tmp_path / "c.yaml", loaded=None, run_dir=tmp_path)  # type: ignore[arg-type]
    for line, steps, device in (("wait 0 cuda\n", 0, "cuda"), ("wait 2\n", 2, "cuda")):
        read, write = os.pipe()
        os.write(write, line.encode())
        os.close(write)
        with io.open(read, "rb", buffering=0) as incoming:  # noqa: UP020 - a descriptor, as the coordinator's pipe is
            side.turns_in = incoming
            _await(side, time.monotonic() + 5)
        assert (side.steps, side.device) == (steps, device)


def test_a_side_that_breaks_the_turn_protocol_ends_the_pair_instead_of_the_coordinator(tmp_path: Path) -> None:
    """The head side's pipe is its code's to write: a line that is not "wait <steps> [device]" ends that side (the
    pair stops it and keeps what was measured) and raises nothing in the coordinator."""
    import io
    import time

    from canary_action.train.launch.pair import _await

    lines = ("wait x\n", "wait 99999999999999999999\n", "go 3\n", "wait 2 cuda extra\n", "wait \u0663\n",
             "wait 0 ::error::forged\n", "wait 0 " + "cuda" * 30 + "\n", "\udcff\n", "wait 2\nwait 4\n",
             "wait 2")  # fmt: skip
    for line in lines:
        side = _Side(name="head", tree=tmp_path, config_path=tmp_path / "c.yaml", loaded=None, run_dir=tmp_path)  # type: ignore[arg-type]
        read, write = os.pipe()
        os.write(write, line.encode("utf-8", errors="surrogateescape"))  # "\udcff": the byte 0xff, no UTF-8
        os.close(write)
        with io.open(read, "rb", buffering=0) as incoming:  # noqa: UP020 - a descriptor, as the coordinator's pipe is
            side.turns_in = incoming
            _await(side, time.monotonic() + 5)
        assert side.ended, line
        assert not side.ready


def test_an_endless_line_on_the_pipe_is_read_no_further_than_a_turn_message(tmp_path: Path) -> None:
    """A head side writing a line without end grew the coordinator's memory with it: the line is now read to the
    length of a turn message and the side ended, while the writer still has most of its line to write."""
    import io
    import threading
    import time

    from canary_action.train.launch.pair import _await

    side = _Side(name="head", tree=tmp_path, config_path=tmp_path / "c.yaml", loaded=None, run_dir=tmp_path)  # type: ignore[arg-type]
    read, write = os.pipe()
    finished = threading.Event()

    def endless() -> None:
        try:
            os.write(write, b"wait " + b"9" * (20 << 20))  # 20 MiB, far beyond the pipe's buffer, no newline
        except OSError:
            pass
        finally:
            finished.set()

    writer = threading.Thread(target=endless, daemon=True)
    writer.start()
    with io.open(read, "rb", buffering=0) as incoming:  # noqa: UP020 - a descriptor, as the coordinator's pipe is
        side.turns_in = incoming
        _await(side, time.monotonic() + 5)
        assert side.ended
        assert not finished.is_set()  # the rest of the line is still unwritten: it was never read
    os.close(write)
    writer.join(timeout=10)


def test_a_turn_message_that_never_ends_is_a_hang_at_the_deadline_not_a_wait_forever(tmp_path: Path) -> None:
    """`wait 0` with no newline, the pipe kept open: the coordinator's readline blocked past every deadline."""
    import io
    import time

    import pytest

    from canary_action.train.launch.pair import _await

    side = _Side(name="head", tree=tmp_path, config_path=tmp_path / "c.yaml", loaded=None, run_dir=tmp_path)  # type: ignore[arg-type]
    read, write = os.pipe()
    os.write(write, b"wait 0")
    try:
        with io.open(read, "rb", buffering=0) as incoming:  # noqa: UP020 - a descriptor, as the coordinator's pipe is
            side.turns_in = incoming
            with pytest.raises(TimeoutError, match="before the pair's deadline"):
                _await(side, time.monotonic() + 0.5)
    finally:
        os.close(write)
