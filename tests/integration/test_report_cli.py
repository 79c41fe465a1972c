"""`canary report` as the action and users call it: a result.json in, each format out; bad input exits 2; the
light import path; and the templates found in an installed (not editable) copy of the package."""

from __future__ import annotations

import json
import os
import pty
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Final

import pytest

from canary_action.report.render import Kind, check_output, render
from canary_action.report.terminal import render_terminal
from canary_action.report.view import Links
from tests.integration.test_cli import ROOT, canary
from tests.integration.test_compare_cli import save
from tests.report_cases import failing

BAD: Final = ROOT / "tests" / "fixtures" / "reports" / "bad"
TEMPLATES: Final = sorted(p.name for p in (ROOT / "templates").glob("*.j2"))


@pytest.fixture(scope="module")
def result_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("report") / "result.json"
    path.write_text(failing().model_dump_json(indent=2), encoding="utf-8")
    return path


@pytest.mark.parametrize("kind", ["comment", "summary", "markdown"])
def test_each_markdown_format_prints_its_report(result_file: Path, kind: Kind) -> None:
    done = canary("report", result_file, "--format", kind)
    assert done.returncode == 0, done.stderr
    assert done.stdout == render(failing(), kind)
    assert done.stderr == ""


def test_the_default_format_is_markdown(result_file: Path) -> None:
    assert canary("report", result_file).stdout == render(failing(), "markdown")


def test_check_prints_the_check_runs_output_as_json(result_file: Path) -> None:
    done = canary("report", result_file, "--format", "check")
    assert done.returncode == 0, done.stderr
    output = json.loads(done.stdout)
    assert set(output) == {"title", "summary", "text"}
    assert output == check_output(failing())
    assert output["title"] == "rlhf-canary: regression (step_time)"


def test_output_file(result_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "deep" / "comment.md"
    done = canary("report", result_file, "--format", "comment", "-o", out)
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    assert f"wrote {out}" in done.stderr
    assert out.read_text(encoding="utf-8").startswith("<!-- rlhf-canary:sticky:sft-smoke -->\n### ❌")


def test_report_of_compare_json_is_what_compare_prints(tmp_path: Path) -> None:
    """In each form: compare prints the terminal form, and GitHub markdown with --format markdown or into -o; report
    prints markdown into a pipe (the default away from a terminal), and the terminal form when asked."""
    baseline = save(tmp_path / "base.json", 100)
    current = save(tmp_path / "cur.json", 1, step_time_s=0.13)
    as_terminal = canary("compare", current, baseline)
    as_markdown = canary("compare", current, baseline, "--format", "markdown")
    canary("compare", current, baseline, "-o", tmp_path / "report.md")
    canary("compare", current, baseline, "--json", "-o", tmp_path / "result.json")
    assert canary("report", tmp_path / "result.json").stdout == as_markdown.stdout
    assert canary("report", tmp_path / "result.json", "--format", "terminal").stdout == as_terminal.stdout
    assert (tmp_path / "report.md").read_text(encoding="utf-8") == as_markdown.stdout
    assert as_terminal.stdout.startswith("rlhf-canary REGRESSION — sft-smoke\n")
    assert as_markdown.stdout.startswith("### ❌ rlhf-canary **regression** — `sft-smoke`\n")


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("corrupt.json", "is not valid JSON"),
        ("wrong_version.json", "has result_schema_version 99; this canary reads 1, 2, 3 and 4"),
        ("not_object.json", "is not an rlhf-canary compare result"),
        ("metrics_not_result.json", "is not an rlhf-canary compare result"),
        ("bad_field.json", "verdict: Input should be 'pass', 'regression', 'neutral' or 'crashed'"),
        ("missing.json", "does not exist"),
    ],
)
def test_a_bad_result_exits_2_with_one_message(name: str, expected: str) -> None:
    done = canary("report", BAD / name, "--format", "comment")
    assert done.returncode == 2, done.stdout + done.stderr
    assert expected in done.stderr
    assert done.stderr.count("fix:") == 1
    assert "Traceback" not in done.stderr
    assert done.stdout == ""


def test_0_1s_repo_and_pr_flags_link_the_report_to_the_pull_request(result_file: Path, tmp_path: Path) -> None:
    """Issue 15 item 3: 0.1's `canary report COMPARISON --repo OWNER/NAME --pr N`. Nothing is posted."""
    pull = "[octo-org/my-repo#123](https://github.com/octo-org/my-repo/pull/123)"
    for kind in ("comment", "summary", "markdown"):
        done = canary("report", result_file, "--repo", "octo-org/my-repo", "--pr", "123", "--format", kind)
        assert done.returncode == 0, done.stderr
        assert done.stdout == render(failing(), kind, Links(repository="octo-org/my-repo", pull_request=123))
        assert pull in done.stdout
    check = canary("report", result_file, "--repo", "octo-org/my-repo", "--pr", "123", "--format", "check")
    assert pull in json.loads(check.stdout)["summary"]
    repository = canary("report", result_file, "--repo", "octo-org/my-repo")
    assert "[octo-org/my-repo](https://github.com/octo-org/my-repo)" in repository.stdout
    assert "/pull/" not in repository.stdout
    out = tmp_path / "comment.md"
    written = canary("report", result_file, "--repo", "octo-org/my-repo", "--pr", "123", "-o", out)
    assert "markdown report for octo-org/my-repo#123, verdict regression" in written.stderr
    assert pull in out.read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--repo", "octo-org"], "--repo 'octo-org' is not a repository as OWNER/NAME"),
        (["--repo", "https://github.com/octo-org/my-repo"], "is a URL, not OWNER/NAME"),
        (["--repo", "octo-org/my repo"], "is not a repository as OWNER/NAME"),
        (["--repo", "octo-org/.."], "is not a repository as OWNER/NAME"),
        (["--repo", "-octo/my-repo"], "is not a repository as OWNER/NAME"),
        (["--repo", "octo-org/my-repo", "--pr", "0"], "--pr '0' is not a pull request number"),
        (["--repo", "octo-org/my-repo", "--pr", "#12"], "--pr '#12' is not a pull request number"),
        (["--repo", "octo-org/my-repo", "--pr", "-3"], "--pr '-3' is not a pull request number"),
        (["--repo", "octo-org/my-repo", "--pr", "12.0"], "--pr '12.0' is not a pull request number"),
        (["--repo", "octo-org/my-repo", "--pr", "99999999999"], "larger than any pull request number"),
        (["--pr", "12"], "--pr 12 needs --repo"),
    ],
)
def test_a_bad_repo_or_pr_exits_2_with_a_fix(result_file: Path, args: list[str], expected: str) -> None:
    done = canary("report", result_file, *args)
    assert done.returncode == 2, done.stdout + done.stderr
    assert expected in done.stderr
    assert done.stderr.count("fix:") == 1
    assert "Traceback" not in done.stderr
    assert done.stdout == ""


def test_every_bad_fixture_is_covered() -> None:
    assert {p.name for p in BAD.glob("*.json")} == {
        "corrupt.json", "wrong_version.json", "not_object.json", "metrics_not_result.json", "bad_field.json",
    }  # fmt: skip


def test_report_imports_no_training_stack(result_file: Path) -> None:
    code = (
        "import sys\n"
        "from canary_action.cli import cli\n"
        "for kind in ('comment', 'check', 'summary', 'markdown'):\n"
        "    cli.main(['report', sys.argv[1], '--format', kind], standalone_mode=False)\n"
        "heavy = [m for m in ('torch', 'transformers', 'trl', 'numpy') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    done = subprocess.run([sys.executable, "-c", code, str(result_file)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


@pytest.mark.packaging
def test_an_installed_wheel_carries_the_templates(result_file: Path, tmp_path: Path) -> None:
    """Built and installed like a user's `pip install` (not editable), the package renders from its own copy."""
    source = tmp_path / "src"  # a copy, so that the build writes nothing into the working tree
    for folder in ("canary_action", "templates"):  # what the Dockerfile copies to build the package
        shutil.copytree(ROOT / folder, source / folder, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, source / name)
    env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_INPUT": "1"}
    pip = [sys.executable, "-m", "pip", "-q"]
    build = [*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", tmp_path / "dist", source]
    subprocess.run(build, check=True, capture_output=True, env=env, timeout=300)
    [wheel] = (tmp_path / "dist").glob("rlhf_canary-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert sorted(n.rsplit("/", 1)[1] for n in names if n.startswith("canary_action/templates/")) == TEMPLATES
    assert "canary_action/py.typed" in names
    assert {"canary_action/history/assets/site.css", "canary_action/history/assets/ledger.js"} <= set(names)
    site = tmp_path / "site"
    subprocess.run([*pip, "install", "--no-deps", "--target", site, wheel], check=True, capture_output=True, env=env)

    code = (
        "import sys, canary_action\n"
        "from canary_action.cli import main\n"
        "print(canary_action.__file__, file=sys.stderr)\n"
        "main()\n"
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    done = subprocess.run(
        [sys.executable, "-c", code, "report", str(result_file), "--format", "comment"],
        capture_output=True, text=True, cwd=elsewhere, env={**env, "PYTHONPATH": str(site)}, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stderr.startswith(str(site / "canary_action" / "__init__.py"))
    assert done.stdout == render(failing(), "comment")
    shutil.rmtree(source / "templates")  # the installed copy renders from its own templates, not the checkout's
    again = subprocess.run(
        [sys.executable, "-c", code, "report", str(result_file), "--format", "summary"],
        capture_output=True, text=True, cwd=elsewhere, env={**env, "PYTHONPATH": str(site)}, check=False,
    )  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert again.stdout == render(failing(), "summary")


# --- the terminal form and colour (issue 15 item 14) ----------------------------------------------------------------

ANSI: Final = re.compile(r"\x1b\[[0-9;]*m")


def canary_env(*args: str | Path, **env: str) -> subprocess.CompletedProcess[str]:
    """canary with FORCE_COLOR and NO_COLOR as given (and otherwise unset, whatever the test's own shell has)."""
    clean = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "NO_COLOR")}
    command = [sys.executable, "-c", "from canary_action.cli import main; main()", *map(str, args)]
    return subprocess.run(command, capture_output=True, text=True, env={**clean, **env}, timeout=120, check=False)


def test_the_terminal_form_has_no_colour_into_a_pipe_and_colour_when_forced(result_file: Path) -> None:
    piped = canary_env("report", result_file, "--format", "terminal")
    assert piped.returncode == 0, piped.stderr
    assert piped.stdout == render_terminal(failing())
    assert "\x1b[" not in piped.stdout
    assert "\\_" not in piped.stdout
    forced = canary_env("report", result_file, "--format", "terminal", FORCE_COLOR="1")
    assert ANSI.search(forced.stdout)
    assert ANSI.sub("", forced.stdout) == piped.stdout
    assert "\x1b[" not in canary_env("report", result_file, "--format", "terminal", NO_COLOR="1").stdout
    written = result_file.parent / "terminal.txt"
    canary_env("report", result_file, "--format", "terminal", "-o", written, FORCE_COLOR="1")
    assert written.read_text(encoding="utf-8") == piped.stdout  # a file never gets colour codes


def test_on_a_terminal_report_defaults_to_the_terminal_form_in_colour(result_file: Path) -> None:
    leader, follower = pty.openpty()
    clean = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "NO_COLOR")}
    command = [sys.executable, "-c", "from canary_action.cli import main; main()", "report", str(result_file)]
    with subprocess.Popen(command, stdout=follower, stderr=subprocess.PIPE, env=clean) as process:
        os.close(follower)
        chunks = []
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # EIO: the child closed its end
                break
            if not chunk:
                break
            chunks.append(chunk)
        assert process.wait(timeout=60) == 0
    os.close(leader)
    shown = b"".join(chunks).decode("utf-8").replace("\r\n", "\n")
    assert ANSI.search(shown)
    assert ANSI.sub("", shown) == render_terminal(failing())


# --- a team's own templates (issue 15 item 17) ------------------------------------------------------------------------


def test_templates_shape_every_github_format(result_file: Path, tmp_path: Path) -> None:
    team = tmp_path / "team"
    team.mkdir()
    (team / "pr_comment.md.j2").write_text("Team says: {{ v.title }}\n", encoding="utf-8")
    (team / "compare.md.j2").write_text("Team compare: {{ v.counts }}\n", encoding="utf-8")
    comment = canary("report", result_file, "--format", "comment", "--templates", team)
    assert comment.returncode == 0, comment.stderr
    title = "❌ rlhf-canary **regression** — `sft-smoke`"
    assert comment.stdout == f"<!-- rlhf-canary:sticky:sft-smoke -->\nTeam says: {title}\n"
    assert canary("report", result_file, "--templates", team).stdout.startswith("Team compare: 1 failed")
    check = json.loads(canary("report", result_file, "--format", "check", "--templates", team).stdout)
    assert check == check_output(failing())  # the check run's templates were not replaced
    baseline = save(tmp_path / "base.json", 100)
    current = save(tmp_path / "cur.json", 1, step_time_s=0.13)
    compared = canary("compare", current, baseline, "--templates", team)  # --templates: markdown by default
    assert compared.returncode == 1
    assert compared.stdout.startswith("Team compare: 1 failed")


@pytest.mark.parametrize(
    ("files", "args", "expected"),
    [
        ({"pr_comment.md.j2": "{% if %}"}, ["--format", "comment"], "pr_comment.md.j2 line 1: TemplateSyntaxError"),
        ({"pr_comment.md.j2": "{{ v.nope }}"}, ["--format", "comment"], "has no attribute 'nope'"),
        ({"pr_comment.md.j2": "{{ v.title|safe }}"}, ["--format", "comment"], "No filter named 'safe'"),
        ({"pr-comment.md.j2": "x"}, [], "did you mean pr_comment.md.j2?"),
        ({"pr_comment.md.j2": "x"}, ["--format", "terminal"], "the terminal format uses no template"),
    ],
)
def test_a_bad_template_exits_2_naming_the_file_and_the_fix(
    result_file: Path, tmp_path: Path, files: dict[str, str], args: list[str], expected: str
) -> None:
    team = tmp_path / "team"
    team.mkdir()
    for name, body in files.items():
        (team / name).write_text(body, encoding="utf-8")
    done = canary("report", result_file, "--templates", team, *args)
    assert done.returncode == 2, done.stdout + done.stderr
    assert expected in done.stderr
    assert done.stderr.count("fix:") == 1
    assert "Traceback" not in done.stderr
    assert done.stdout == ""
