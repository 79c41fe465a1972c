"""The README starts with the two commands that set up a fresh machine: the main job and the tests. CI runs the
second exactly as written (.ci/run), and both install through scripts/install.sh (the CPU build of torch)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return [block.strip() for block in re.findall(r"```bash\n(.*?)```", text, re.S)][:2]


def test_the_readme_starts_with_the_main_job_and_the_test_command() -> None:
    main_job, tests = readme_commands()
    assert main_job == "bash scripts/main-job.sh"
    assert tests == "bash scripts/install.sh && .venv/bin/pytest -n 2 --dist worksteal"


def test_ci_runs_the_readmes_test_command_as_written() -> None:
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    marked = re.search(r"# --- README test command.*?\n(.*?)\n# ---", ci, re.S)
    assert marked is not None
    assert marked.group(1).strip() == readme_commands()[1]


def test_the_main_job_installs_through_the_same_script() -> None:
    script = (ROOT / "scripts" / "main-job.sh").read_text(encoding="utf-8")
    assert "bash scripts/install.sh train" in script
    assert "pip install" not in script


def test_the_readme_sends_a_newcomer_to_the_adoption_page_first() -> None:
    """Issue 35: the page that adds the gate to a repository is the README's first link; the README stays short (the
    reference lives in docs/), and its workflow is docs/adopt.md's (tests/contract/test_adopt.py runs it)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    first_link = re.search(r"\]\(([^)]+)\)", text)
    assert first_link is not None
    assert first_link.group(1) == "docs/adopt.md"
    assert len(text.splitlines()) <= 250
    assert "```yaml" not in text


def test_the_readme_describes_the_builtin_sample_as_it_is(tmp_path: Path) -> None:
    """The README said the --builtin sample was builtin pythia-70m; it is builtin:tiny-llama."""
    from canary_action.config.load import load_config, write_sample_config

    sample = tmp_path / "canary.yaml"
    sample.write_text(write_sample_config("dpo", "smoke", builtin=True), encoding="utf-8")
    config = load_config(sample).config
    text = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    said = (
        f"{config.max_steps} {config.training_type.upper()} steps of {config.model_name} "
        f"{'with LoRA' if config.use_peft else 'without LoRA'} at max_length {config.max_length}"
    )
    assert said in text
