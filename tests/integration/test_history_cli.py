"""`canary history append` and `canary history build` as a workflow calls them: exit codes, messages, files."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.history_cases import REPOSITORY, compared_run, make_entries, write_entries
from tests.integration.test_cli import ROOT, canary
from tests.unit.test_history import PAIR_RESULT


def test_append_then_build(tmp_path: Path) -> None:
    out = compared_run(tmp_path)
    history = tmp_path / "branch" / "history.jsonl"
    done = canary("history", "append", history, out, "--repository", REPOSITORY, "--run-id", "7",
                  "--pull-request", "12", "--pull-request-result", PAIR_RESULT)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"{history}: sft-smoke 3f2a9c1d4e5b ")
    [line] = [json.loads(t) for t in history.read_text(encoding="utf-8").splitlines()]
    assert line["run_id"] == 7
    assert line["pull_request"]["number"] == 12
    assert [e["check"] for e in line["pull_request"]["effects"]][:1] == ["step_time"]

    again = canary("history", "append", history, out, "--repository", REPOSITORY, "--run-id", "7")
    assert again.returncode == 0, again.stderr
    assert "note: replaced the entry of workflow run 7 (a re-run)" in again.stderr

    site = tmp_path / "site"
    built = canary("history", "build", history, "-o", site)
    assert built.returncode == 0, built.stderr
    assert built.stdout == f"{site / 'index.html'}: 1 configs, 1 runs\n"
    assert (site / "config-sft-smoke.html").is_file()


def test_bad_input_is_exit_2_with_the_cause_and_the_fix(tmp_path: Path) -> None:
    out = compared_run(tmp_path)
    history = tmp_path / "history.jsonl"
    wrong_sha = canary("history", "append", history, out, "--repository", REPOSITORY, "--commit", "abc")
    assert wrong_sha.returncode == 2
    assert "--commit 'abc' is not a full commit SHA" in wrong_sha.stderr
    assert "fix: pass its 40 lowercase hex digits" in wrong_sha.stderr

    pair = tmp_path / "pair"
    pair.mkdir()
    (pair / "result.json").write_bytes(PAIR_RESULT.read_bytes())
    not_a_run = canary("history", "append", history, pair, "--repository", REPOSITORY)
    assert not_a_run.returncode == 2
    assert "is a lockstep pair's result (a pull request's)" in not_a_run.stderr
    assert not history.exists()

    history.write_text("<html>\n{}\n", encoding="utf-8")
    junk = canary("history", "build", history, "-o", tmp_path / "site")
    assert junk.returncode == 2
    assert "no line of it is a history line this version reads (line 1: not JSON)" in junk.stderr
    appended = canary("history", "append", history, out, "--repository", REPOSITORY)
    assert appended.returncode == 2  # a file of junk is not silently replaced
    assert history.read_text(encoding="utf-8") == "<html>\n{}\n"

    artifacts = canary("history", "build", tmp_path, "-o", tmp_path / "site")
    assert artifacts.returncode == 2
    assert "a folder of artifacts names no repository" in artifacts.stderr


def test_build_notes_what_it_left_out_and_imports_no_torch(tmp_path: Path) -> None:
    history = write_entries(tmp_path / "history.jsonl", make_entries(3))
    with history.open("a", encoding="utf-8") as out:
        out.write("not json\n")
    code = (
        "import sys\n"
        "from canary_action.cli import cli\n"
        "cli.main(['history', 'build', sys.argv[1], '-o', sys.argv[2]], standalone_mode=False)\n"
        "heavy = [m for m in ('torch', 'transformers', 'trl') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    done = subprocess.run([sys.executable, "-c", code, str(history), str(tmp_path / "site")], cwd=ROOT,
                          capture_output=True, text=True, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stderr == "note: line 4: not JSON\n"
    assert "1 configs, 3 runs" in done.stdout


def test_a_folder_without_a_run_or_a_wrong_repository_is_exit_2(tmp_path: Path) -> None:
    (tmp_path / "artifacts").mkdir()
    empty = canary("history", "build", tmp_path / "artifacts", "--repository", REPOSITORY, "-o", tmp_path / "site")
    assert empty.returncode == 2
    assert "no default-branch run's result.json (with its metrics.json) found" in empty.stderr
    wrong = canary("history", "build", tmp_path / "artifacts", "--repository", "not a repo", "-o", tmp_path / "site")
    assert wrong.returncode == 2
    assert "--repository 'not a repo' is not OWNER/NAME" in wrong.stderr
