"""docs/migrating.md puts rlhf-canary 0.1's interface beside ours; these tests keep it complete and true."""

from __future__ import annotations

import re
from pathlib import Path

from canary_action.cli import cli
from canary_action.config.load import OLD_FORMAT_KEYS
from canary_action.config.schema import FAMILIES
from canary_action.config.thresholds import Thresholds

DOC = (Path(__file__).parents[2] / "docs" / "migrating.md").read_text(encoding="utf-8")
#: rlhf-canary 0.1's commands and the flags its users call them with.
OLD_COMMANDS = {
    "env": [],
    "run": ["-o"],
    "compare": ["--threshold-tier", "--threshold-file", "-o", "--json"],
    "save-baseline": [],
    "init-config": ["--type", "--tier"],
    "gh-report": [
        "--threshold-tier", "--threshold-file", "--post-comment", "--no-comment", "--update-status", "--no-status",
    ],
    "report": ["--repo", "--pr"],
}  # fmt: skip
OLD_THRESHOLD_KEYS = [
    "max_step_time_increase_pct", "max_tps_drop_pct", "max_mem_increase_mb", "max_mem_increase_pct",
    "nan_steps_allowed", "inf_steps_allowed", "max_loss_increase_pct", "min_step_count", "confidence_level",
]  # fmt: skip


def section(title: str) -> str:
    start = DOC.index(f"\n## {title}\n")
    end = DOC.find("\n## ", start + 1)
    return DOC[start : end if end != -1 else None]


def test_every_command_of_0_1_is_in_the_table_and_still_takes_its_flags() -> None:
    table = section("Commands")
    for name, flags in OLD_COMMANDS.items():
        assert f"`canary {name}" in table, name
        command = cli.commands[name]
        ours = {opt for param in command.params for opt in (*param.opts, *param.secondary_opts)}
        assert set(flags) <= ours, f"{name} lost {set(flags) - ours}"


def test_every_command_of_ours_is_named() -> None:
    table = section("Commands")
    assert all(f"`canary {name}" in table for name in cli.commands), set(cli.commands)


def test_every_threshold_key_is_named_and_0_1_s_keys_are_ours() -> None:
    text = section("Thresholds")
    keys = set(re.findall(r"`(\w+)`", text))
    assert set(OLD_THRESHOLD_KEYS) <= set(Thresholds.model_fields)
    assert set(Thresholds.model_fields) <= keys, set(Thresholds.model_fields) - keys


def test_every_0_1_config_key_is_still_a_key() -> None:
    ours = {key for family in FAMILIES.values() for key in family.model_fields}
    retired = {"use_synthetic_reward"}  # dropped with a notice; the page says why
    assert OLD_FORMAT_KEYS - retired <= ours
    assert all(f"`{key}`" in DOC for key in retired)
