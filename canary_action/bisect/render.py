"""`canary bisect`'s reports: for a terminal, and GitHub markdown for an issue or a comment (bisect.md)."""

from __future__ import annotations

from typing import Final, Literal

from canary_action.bisect.result import CALL_WORDS, BisectResult, CommitRef, EffectRecord, Finding
from canary_action.metrics.io import counted

MARKER: Final = "<!-- rlhf-canary bisect -->"
HEADLINES: Final = {
    "found": "found the commit",
    "several": "found more than one change",
    "not-clear": "narrowed, not to one commit",
    "not-confirmed": "the regression is not confirmed",
    "interrupted": "interrupted",
    "failed": "stopped by an error",
}


def effect_text(effect: EffectRecord | None) -> str:
    if effect is None:
        return "—"
    if effect.pct == effect.low == effect.high == 0:  # the good commit's level: 0 by definition, not measured
        return "0 (the good commit)"
    return f"{effect.pct:+.1f} % [{effect.low:+.1f}, {effect.high:+.1f}]"


def wall_text(seconds: float) -> str:
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest:02d} s" if minutes else f"{rest} s"


def commit_text(commit: CommitRef, kind: Literal["terminal", "markdown"]) -> str:
    subject = commit.subject.replace("|", "\\|").replace("`", "'") if kind == "markdown" else commit.subject
    return f"`{commit.sha[:10]}` {subject}" if kind == "markdown" else f"{commit.sha[:10]} {subject}"


def finding_lines(finding: Finding, check: str, kind: Literal["terminal", "markdown"]) -> list[str]:
    change = f"{check} {effect_text(finding.before)} → {effect_text(finding.after)} against the good commit"
    if finding.clear:
        return [f"{commit_text(finding.commits[0], kind)}: {change}"]
    first, last = finding.commits[0], finding.commits[-1]
    if first is last:
        lines = [f"{commit_text(first, kind)}, not clearly: {change}"]
    else:
        lines = [f"one of {counted(len(finding.commits), 'commit')}, {first.sha[:10]}..{last.sha[:10]}: {change}"]
    lines.append(f"stopped: {finding.why}")
    return lines


def render_terminal(result: BisectResult) -> str:
    lines = [
        f"canary bisect: {HEADLINES[result.status]}",
        f"  {result.config}: {counted(result.commits, 'commit')} after the good {result.good.sha[:10]} up to the bad "
        f"{result.bad.sha[:10]}; following {result.check or 'the failing check'}",
        "",
        f"  {'pair':<5}{'commit':<12}{'effect (95 % interval)':<28}what it says",
    ]
    for number, step in enumerate(result.steps, start=1):
        said = CALL_WORDS[step.call] + (f" — {step.why}" if step.why else "")
        lines.append(f"  {number:<5}{step.commit.sha[:10]:<12}{effect_text(step.effect):<28}{said}")
    lines.append("")
    for finding in result.findings:
        lines += ["  " + line for line in finding_lines(finding, result.check or "", "terminal")]
    lines.append(f"{result.status}: {result.summary}")
    lines.append(f"  {counted(result.pairs, 'pair')} (at most {result.max_pairs}), {wall_text(result.wall_s)}")
    return "\n".join(lines) + "\n"


def render_markdown(result: BisectResult) -> str:
    lines = [
        MARKER,
        f"## rlhf-canary bisect: {HEADLINES[result.status]}",
        "",
        f"{result.summary}",
        "",
        f"`{result.config}`, {counted(result.commits, 'commit')} after the good `{result.good.sha[:10]}` up to the "
        f"bad `{result.bad.sha[:10]}` (first parents), following `{result.check or 'the failing check'}`. "
        f"{counted(result.pairs, 'lockstep pair')} (at most {result.max_pairs}), {wall_text(result.wall_s)}.",
        "",
    ]
    if result.findings:
        lines += ["### Found", ""]
        for finding in result.findings:
            first, *rest = finding_lines(finding, result.check or "", "markdown")
            lines.append(f"- {first}")
            lines += [f"  {line}" for line in rest]
        lines.append("")
    lines += ["### Pairs", "", "| # | commit | effect (95 % interval) | what it says |", "|---|---|---|---|"]
    for number, step in enumerate(result.steps, start=1):
        said = CALL_WORDS[step.call] + (f": {step.why}" if step.why else "")
        said = said.replace("|", "\\|")
        lines.append(f"| {number} | {commit_text(step.commit, 'markdown')} | {effect_text(step.effect)} | {said} |")
    return "\n".join(lines) + "\n"
