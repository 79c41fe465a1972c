"""The docs name what exists (issue 35): every action input a workflow in them passes, every config and threshold
key written as `key: value` or `--set key=value`, and every `canary` command and flag they show is one that
action.yml, the config schema and the CLI have; and the list of what a pull request may change in its config is the
code's. Each finder is shown to catch a planted wrong name."""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import click
import pytest
import yaml
from pydantic import BaseModel

from canary_action.cli import cli
from canary_action.compare.diff import PULL_REQUEST_MAY_CHANGE
from canary_action.config.schema import FAMILIES
from canary_action.config.thresholds import ThresholdFile, Thresholds
from tests.unit.test_doc_links import markdown_of, prose_of

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted([ROOT / "README.md", *ROOT.glob("docs/**/*.md"), *ROOT.glob("docs/tutorials/*.ipynb")])
WORKFLOWS = sorted(ROOT.glob("docs/examples/*.yml"))
ACTIONS = {
    "rlhf-canary/rlhf-canary": ROOT / "action.yml",
    "rlhf-canary/rlhf-canary/python": ROOT / "python" / "action.yml",
    "rlhf-canary/rlhf-canary/report": ROOT / "report" / "action.yml",
}
#: Keys with an underscore that docs write as `key: value` and that are not the config's: the metrics.json
#: document's, the compare result's, GitHub's API and workflow syntax's.
OTHER_KEYS = {
    "schema_version", "run_id", "started_at", "fingerprint_hash", "container_image", "container_image_digest",
    "head_sha", "details_url", "check_run", "html_url", "evaluated_in", "cancel_in_progress", "fail_fast",
    "torch_threads", "cpu_count", "setup_packages", "pull_request", "pull_request_target", "workflow_run",
    "workflow_dispatch", "issue_comment", "merge_group", "author_association", "max_parallel", "num_steps",
    "stop_reason", "exception_type", "min_effect_pct", "effect_pct", "ci_low", "ci_high", "result_schema_version",
    "key.path",  # `--set key.path=value`: the form itself
    "max_stepz",  # configs.md's example of the error a misspelt --set key gets
}  # fmt: skip


@cache
def config_keys() -> frozenset[str]:
    """Every config key a family has, dotted into its blocks, and every threshold key (a config's thresholds block,
    a threshold file's `base_tier`)."""
    keys: set[str] = set()

    def walk(model: type[BaseModel], prefix: str) -> None:
        for name, field in model.model_fields.items():
            keys.add(prefix + name)
            for kind in (field.annotation, *getattr(field.annotation, "__args__", ())):
                if isinstance(kind, type) and issubclass(kind, BaseModel):
                    walk(kind, f"{prefix}{name}.")

    for family in FAMILIES.values():
        walk(family, "")
    keys |= set(Thresholds.model_fields) | set(ThresholdFile.model_fields)
    keys |= {f"thresholds.{k}" for k in (*Thresholds.model_fields, *ThresholdFile.model_fields)}
    return frozenset(keys)


def inputs_of(action: str) -> set[str]:
    return set(yaml.safe_load(ACTIONS[action].read_text(encoding="utf-8"))["inputs"])


def steps_of(doc: Any) -> Iterator[dict[str, Any]]:
    for job in (doc.get("jobs") or {}).values() if isinstance(doc, dict) else ():
        yield from job.get("steps") or []


def yaml_blocks(page: Path) -> Iterator[str]:
    yield from re.findall(r"^```ya?ml\n(.*?)^```", markdown_of(page), re.S | re.M)


def wrong_inputs(doc: Any, where: str) -> list[str]:
    found = []
    for step in steps_of(doc):
        action = str(step.get("uses", "")).split("@")[0]
        if action in ACTIONS:
            found += [
                f"{where}: {action} has no input `{k}`" for k in step.get("with") or {} if k not in inputs_of(action)
            ]
    return found


KEY_VALUE = re.compile(r"`([a-z][a-z0-9_]*(?:\.[a-z0-9_]+)*): [^`]+`")
SET = re.compile(r"--set ([a-z][a-z0-9_.]*)=")


def wrong_keys(text: str, where: str) -> list[str]:
    """`key: value` with an underscore in its key, or `--set key=value`, naming no config or threshold key."""
    prose = prose_of(text)
    named = [m for m in KEY_VALUE.findall(prose) if "_" in m] + SET.findall(text)
    return [f"{where}: `{k}` is no config key" for k in named if k not in config_keys() and k not in OTHER_KEYS]


#: `canary <command>` where a command line starts: a line or span's start (after `$ `, a venv's bin/, `&&`, `;`).
COMMAND = re.compile(r"(?:^|&&|;|\$ |/bin/)\s*canary ([a-z][a-z-]+)((?:[ \t]+(?:[^\s`|;&]+))*)", re.M)


def wrong_commands(text: str, where: str) -> list[str]:
    """`canary <command> ... --flag`: the command exists, and so does each flag shown with it."""
    found = []
    for line in text.splitlines():
        if line.lstrip().startswith("#"):
            continue  # a comment, prose
        for first, after in COMMAND.findall(line.strip()):
            command, rest, sub = first, after, cli.commands.get(first)
            if isinstance(sub, click.Group):  # `canary history build ...`: the group's command, then its flags
                if not after.strip():
                    continue  # the group named alone
                name, _, rest = after.strip().partition(" ")
                command, sub = f"{first} {name}", sub.commands.get(name)
            if sub is None:
                found.append(f"{where}: `canary {command}` is no command")
                continue
            flags = {o for p in sub.params if isinstance(p, click.Option) for o in (*p.opts, *p.secondary_opts)}
            flags |= {"--help", "-h", "-v", "--verbose"}
            found += [f"{where}: canary {command} has no {f}" for f in re.findall(r"(?<![\w-])(--[a-z][a-z-]*)", rest)
                      if f not in flags]  # fmt: skip
    return found


def code_of(text: str) -> str:
    """Where docs show commands: code spans and fenced blocks."""
    spans = re.findall(r"`([^`\n]+)`", text)
    blocks = re.findall(r"^```[a-z]*\n(.*?)^```", text, re.S | re.M)
    return "\n".join([*spans, *blocks])


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_docs_name_inputs_keys_and_commands_that_exist(page: Path) -> None:
    text = markdown_of(page)
    where = str(page.relative_to(ROOT))
    problems = wrong_keys(text, where) + wrong_commands(code_of(text), where)
    for block in yaml_blocks(page):
        try:
            problems += wrong_inputs(yaml.safe_load(block), where)
        except yaml.YAMLError:
            continue  # a fragment (a `with:` block alone): not a workflow
    assert problems == []


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_the_example_workflows_pass_inputs_that_exist(path: Path) -> None:
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert wrong_inputs(doc, path.name) == []
    assert wrong_commands(path.read_text(encoding="utf-8"), path.name) == []


def test_the_keys_a_pull_request_may_change_are_listed_from_the_code() -> None:
    text = (ROOT / "docs" / "action.md").read_text(encoding="utf-8")
    listed = re.search(r"<!-- pull-request-may-change:.*?-->\n(.*?)\n<!-- end -->", text, re.S)
    assert listed is not None
    assert re.findall(r"`([^`]+)`", listed.group(1)) == sorted(PULL_REQUEST_MAY_CHANGE)


def test_each_finder_catches_a_planted_wrong_name() -> None:
    workflow = {"jobs": {"j": {"steps": [{"uses": "rlhf-canary/rlhf-canary/python@x", "with": {"tiers": "smoke"}}]}}}
    assert wrong_inputs(workflow, "w") == ["w: rlhf-canary/rlhf-canary/python has no input `tiers`"]
    assert wrong_keys("set `fail_on_learnings: true`, or `--set heldout.enable=false`", "p") == [
        "p: `fail_on_learnings` is no config key",
        "p: `heldout.enable` is no config key",
    ]
    assert wrong_keys("`fail_on_learning: true` and `--set profiler.enabled=true`", "p") == []
    assert wrong_commands("canary history bild h\ncanary history build h --repo x --repository y", "p") == [
        "p: `canary history bild` is no command",
        "p: canary history build has no --repo",
    ]
    assert wrong_commands("canary comapre a b\ncanary pair c --bse x --head y", "p") == [
        "p: `canary comapre` is no command",
        "p: canary pair has no --bse",
    ]


def test_the_finders_read_the_docs_as_written() -> None:
    """Not vacuous: the docs' own commands and keys are found (a finder that matched nothing would pass anything)."""
    texts = [markdown_of(page) for page in PAGES]
    commands = [c for text in texts for line in code_of(text).splitlines() for c, _ in COMMAND.findall(line.strip())]
    keys = [k for text in texts for k in KEY_VALUE.findall(prose_of(text)) + SET.findall(text) if "_" in k]
    with_blocks = [s for page in PAGES for b in yaml_blocks(page) for s in steps_of(_load(b)) if "with" in s]
    assert len(commands) >= 50, commands
    assert {"run", "compare", "pair", "report", "init-config", "bisect"} <= set(commands)
    assert len(keys) >= 30, keys
    assert with_blocks, "the docs' workflows"
    assert wrong_commands(".venv/bin/canary run c.yaml --sett x=1", "p") == ["p: canary run has no --sett"]


def _load(block: str) -> Any:
    try:
        return yaml.safe_load(block)
    except yaml.YAMLError:
        return None


#: The pages a newcomer reads to adopt the gate (issue 35): they held 32,554 words when the issue was filed (README
#: 7,187, action 6,064, runner-setup 6,592, examples/README 2,793, image 1,284, lockstep 6,254, baselines 2,380),
#: and the issue asked for half. The reference moved to pages of its own (configs, commands, metrics, hardening,
#: pair-statistics, troubleshooting, ...), each linked where it was.
ADOPTION_PAGES = ("README.md", "docs/adopt.md", "docs/action.md", "docs/runner-setup.md", "docs/examples/README.md",
                  "docs/image.md", "docs/lockstep.md", "docs/baselines.md")  # fmt: skip
ADOPTION_WORDS = 32_554 // 2


def test_the_adoption_pages_hold_half_the_words_they_did() -> None:
    words = {page: len((ROOT / page).read_text(encoding="utf-8").split()) for page in ADOPTION_PAGES}
    assert sum(words.values()) <= ADOPTION_WORDS, words
    assert len((ROOT / "README.md").read_text(encoding="utf-8").splitlines()) <= 250


def test_the_supported_stack_on_the_adoption_page_is_the_train_extras() -> None:
    """The python action refuses a version outside these ranges (extras.unsupported_versions): the page says them."""
    import tomllib

    from packaging.requirements import Requirement

    extra = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    wanted = [f"{Requirement(r).name}{Requirement(r).specifier}" for r in extra["train"]]
    text = (ROOT / "docs" / "adopt.md").read_text(encoding="utf-8")
    listed = re.search(r"<!-- supported-stack:.*?-->\n(.*?)\n<!-- end -->", text, re.S)
    assert listed is not None
    assert re.findall(r"`([^`]+)`", listed.group(1)) == wanted
