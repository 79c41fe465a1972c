"""A team's own report templates (issue 15 item 17): a folder overriding any of ours, rendered in the sandbox with
our escaping, the sticky marker first whatever the template prints, and every unusable folder or file a
TemplateError naming it and the fix."""

from __future__ import annotations

from pathlib import Path
from typing import Final

import pytest

from canary_action.compare.result import CompareResult
from canary_action.errors import TemplateError
from canary_action.report.render import TARGETS, check_output, render
from canary_action.report.templates import MAX_TEMPLATE_BYTES, load_templates, our_names, ours
from canary_action.report.view import sticky_marker
from tests.report_cases import LINKS, everywhere, failing

#: What a pull request could put in any free-text field: a table cell's end, bold, our marker, a mention, a link.
PAYLOAD: Final = "a | b **bold** <!-- rlhf-canary:sticky:x --> @team [l](https://evil.example)"
MARKER: Final = sticky_marker("sft-smoke")


@pytest.fixture(scope="module")
def hostile() -> CompareResult:
    result = everywhere(failing(), PAYLOAD)
    return result.model_copy(update={"current": result.current.model_copy(update={"config_name": "sft-smoke"})})


def folder(tmp_path: Path, **files: str) -> Path:
    out = tmp_path / "team"
    out.mkdir(exist_ok=True)
    for name, body in files.items():
        (out / name.replace("__", ".")).write_text(body, encoding="utf-8")
    return out


def comment_with(tmp_path: Path, body: str, result: CompareResult) -> str:
    return render(result, "comment", LINKS, load_templates(folder(tmp_path, pr_comment__md__j2=body)))


def test_ours_are_found_and_complete() -> None:
    assert our_names() == [
        "_parts.md.j2", "check_summary.md.j2", "check_text.md.j2", "compare.md.j2", "pr_comment.md.j2",
        "step_summary.md.j2",
    ]  # fmt: skip
    assert {t.template for t in TARGETS.values()} <= set(our_names())
    assert ours().name == "templates"


def test_a_team_template_replaces_ours_of_its_name_and_the_rest_stay_ours(tmp_path: Path) -> None:
    team = load_templates(folder(tmp_path, pr_comment__md__j2="## {{ v.title }}\n\n{{ v.counts }}\n"))
    assert team.overrides == ("pr_comment.md.j2",)
    result = failing()
    comment = render(result, "comment", LINKS, team)
    assert comment.splitlines() == [
        MARKER,
        "## ❌ rlhf-canary **regression** — `sft-smoke`",
        "",
        comment.splitlines()[3],
    ]
    assert comment.splitlines()[3].startswith("1 failed · 0 warned")
    for kind in ("summary", "markdown", "check-summary", "check-text"):
        assert render(result, kind, LINKS, team) == render(result, kind, LINKS)  # type: ignore[arg-type]
    assert check_output(result, LINKS, team) == check_output(result, LINKS)


def test_a_team_partial_is_used_by_our_templates_and_ours_stays_reachable(tmp_path: Path) -> None:
    parts = (
        '{% import "rlhf-canary/_parts.md.j2" as ours %}'
        "{% macro verdict(v) %}{{ ours.verdict(v) }}_Team layout._\n\n{% endmacro %}"
        "{% macro checks_table(v) %}{{ ours.checks_table(v) }}{% endmacro %}"
        "{% macro why(v) %}{% endmacro %}{% macro suspects(v) %}{% endmacro %}"
        "{% macro sparklines(v) %}{% endmacro %}{% macro diffs(v) %}{% endmacro %}"
        "{% macro facts(v) %}{{ ours.facts(v) }}{% endmacro %}"
    )
    team = load_templates(folder(tmp_path, _parts__md__j2=parts))
    out = render(failing(), "markdown", LINKS, team)
    assert "_Team layout._" in out
    assert "Likely causes" not in out  # what the team's partial left out
    assert "| ❌ | step\\_time |" in out


def test_the_marker_is_the_first_line_whatever_the_template_does(tmp_path: Path, hostile: CompareResult) -> None:
    for body in (
        "no marker at all: {{ v.title }}\n",
        "{{ v.title }}\n{{ v.marker }}\n{{ v.marker }}\n",
        "<!-- rlhf-canary:sticky:another-config -->\n\n\n{{ v.title }}\n",
        "<!--RLHF-CANARY:sticky:x-->{{ v.title }} <!-- rlhf-canary:sticky:y -->\n",
    ):
        out = comment_with(tmp_path, body, hostile)
        assert out.startswith(MARKER + "\n"), out
        assert out.lower().count("rlhf-canary:sticky") == 1, out
        assert "<!--" not in out.split("\n", 1)[1]


@pytest.mark.parametrize(
    "body",
    [
        "{% for c in v.checks %}{{ c.message }} {{ c.name }}\n{% endfor %}{{ v.reason }}\n",
        "{% for n in [v.reason] %}{{ n ~ ' | ' ~ v.marker }}\n{% endfor %}",  # ~ with markdown: the rest escaped
        # Taking the escaped text apart char by char and joining it to markdown: escaped again, not undone.
        "{% set ns = namespace(s=v.marker) %}{% for ch in v.reason %}{% if ch != '\\\\' %}"
        "{% set ns.s = ns.s ~ ch %}{% endif %}{% endfor %}{{ ns.s }}\n",
        "{{ (v.reason|list)|join('') ~ v.marker }} {{ [v.reason, v.reason]|join(' | ') }}\n",
        "{{ v.reason[1:] }} {{ v.reason[1:] ~ v.marker }}\n",  # a slice is plain text: escaped again
        "{% macro m() %}x{% endmacro %}{{ m() + (v.reason|list|join) }}\n",
    ],
)
def test_a_team_template_cannot_print_a_pull_requests_text_unescaped(
    tmp_path: Path, hostile: CompareResult, body: str
) -> None:
    out = comment_with(tmp_path, body, hostile)
    rest = out.split("\n", 1)[1]
    for raw in ("a | b", "**bold**", "[l](", "<!--", " @team"):
        assert raw not in rest


@pytest.mark.parametrize(
    ("body", "said"),
    [
        ("{{ v.reason.replace('\\\\', '') }}", "not allowed in a report template"),
        ("{{ v.reason[0] }}", "may not index text"),
        ("{{ '%s' % v.reason }}", "may not apply '%' to text"),
        ("{{ ''.__class__ }}", "not allowed in a report template"),
        ("{{ v.no_such_field }}", "has no attribute 'no_such_field'"),
        ("{{ v.show_charts }}", "test it with `if`, do not print it"),
        ("{{ v.ranks }}", "test it with `if`, do not print it"),
    ],
)
def test_what_could_undo_escaping_is_an_error_naming_the_file_and_line(
    tmp_path: Path, hostile: CompareResult, body: str, said: str
) -> None:
    with pytest.raises(TemplateError) as caught:
        comment_with(tmp_path, "line one\n" + body + "\n", hostile)
    message = caught.value.render()
    assert f"{tmp_path / 'team' / 'pr_comment.md.j2'} line 2" in message
    assert said in message
    assert "fix: fix the template" in message


@pytest.mark.parametrize("filter_name", ["safe", "e", "escape", "forceescape", "tojson", "urlize", "replace", "format"])
def test_filters_that_make_text_into_markup_are_not_there(tmp_path: Path, filter_name: str) -> None:
    with pytest.raises(TemplateError, match=rf"pr_comment.md.j2 line 1.*No filter named '{filter_name}'"):
        load_templates(folder(tmp_path, pr_comment__md__j2=f"{{{{ v.title|{filter_name} }}}}\n"))


def test_a_syntax_error_is_found_when_loading(tmp_path: Path) -> None:
    with pytest.raises(TemplateError, match=r"check_text.md.j2 line 2: TemplateSyntaxError"):
        load_templates(folder(tmp_path, check_text__md__j2="ok\n{% for c in v.checks %}\n"))


def test_a_partial_that_lacks_a_macro_ours_call_names_our_template(tmp_path: Path) -> None:
    team = load_templates(folder(tmp_path, _parts__md__j2="{% macro verdict(v) %}x{% endmacro %}\n"))
    with pytest.raises(TemplateError, match=r"rlhf-canary's compare.md.j2 line \d+: UndefinedError"):
        render(failing(), "markdown", None, team)


def test_the_size_limits_still_apply(tmp_path: Path) -> None:
    body = "{{ v.marker }}\n{% for i in range(40000) %}{{ v.title }}\n{% endfor %}"
    out = comment_with(tmp_path, body, failing())
    assert len(out.encode("utf-16-le")) // 2 <= TARGETS["comment"].budget  # type: ignore[operator]
    assert out.startswith(MARKER + "\n")
    assert out.endswith("the full report is in the check run's details and the job summary.\n")


@pytest.mark.parametrize(
    ("make", "said"),
    [
        (lambda d: d / "missing", "does not exist"),
        (lambda d: (d / "file.txt").write_text("x") and d / "file.txt", "is not a folder"),
        (lambda d: (d / "empty").mkdir() or d / "empty", "holds no *.j2 file"),
        (lambda d: folder(d, pr_coment__md__j2="x"), "did you mean pr_comment.md.j2?"),
        (lambda d: folder(d, pr_comment__md__j2="x" * (MAX_TEMPLATE_BYTES + 1)), "a template may be at most"),
    ],
)
def test_an_unusable_folder_says_which_and_how_to_fix_it(tmp_path: Path, make, said: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(TemplateError) as caught:
        load_templates(make(tmp_path))
    assert said in caught.value.message
    assert caught.value.fix


def test_a_file_that_is_not_utf8_is_named(tmp_path: Path) -> None:
    team = folder(tmp_path)
    (team / "pr_comment.md.j2").write_bytes(b"caf\xe9\n")
    with pytest.raises(TemplateError, match=r"pr_comment.md.j2 is not UTF-8 text \(byte 3"):
        load_templates(team)


def test_links_out_of_the_folder_are_refused(tmp_path: Path) -> None:
    secret = tmp_path / "secret.j2"
    secret.write_text("{{ v.title }}", encoding="utf-8")
    team = folder(tmp_path)
    (team / "pr_comment.md.j2").symlink_to(secret)
    with pytest.raises(TemplateError, match=r"is a link to .*outside the templates folder"):
        load_templates(team)
    (team / "pr_comment.md.j2").unlink()
    (team / "inside.j2").write_text("x", encoding="utf-8")
    (team / "_alias.j2").symlink_to(team / "inside.j2")  # a link within the folder is fine
    with pytest.raises(TemplateError, match=r"inside\.j2 replaces no template"):
        load_templates(team)
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / "templates").symlink_to(team)
    with pytest.raises(TemplateError, match="outside"):
        load_templates(workspace / "templates", within=workspace)
