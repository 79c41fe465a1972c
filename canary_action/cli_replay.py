"""`canary replay RUN_DIR`: a run's captured steps through the model alone, under variants (docs/replay.md)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from canary_action.cli_report import emit
from canary_action.destinations import output_folder, write_output
from canary_action.errors import UsageError
from canary_action.extras import require_training_stack

#: Where a --tree child writes its rows (an internal option: the parent reads them back).
_ROWS_OPTION = "--rows-to"
#: Not inside RUN_DIR: a run folder may be an artifact's content, whose links a write there would follow.
DEFAULT_OUT = Path("canary-replay")


@click.command("replay")
@click.argument("run_dir", type=click.Path(path_type=Path))
@click.option("--step", "steps", type=int, multiple=True, help="Replay this captured step (repeatable; default: all).")
@click.option("--variant", "variants", multiple=True, metavar="KEY=VALUE[,KEY=VALUE]",
              help="A row with these config keys changed (repeatable): dtype=fp32, attn_implementation=sdpa, "
                   "torch_compile=true, gradient_checkpointing=true, use_peft=false...")  # fmt: skip
@click.option(
    "--matrix", is_flag=True, help="The variant matrix of this device (docs/replay.md), after the run's own row."
)
@click.option("--tree", "trees", multiple=True, type=click.Path(path_type=Path, file_okay=False),
              help="Also replay the captured config with this code tree on the import path (repeatable: the base "
                   "commit's tree and the PR's).")  # fmt: skip
@click.option("--repeats", default=3, show_default=True, type=click.IntRange(1, 100), help="Timed repeats per row.")
@click.option("-o", "--output", type=click.Path(path_type=Path),
              help=f"Write replay.json and replay.md to this folder (default: {DEFAULT_OUT}).")  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="Print replay.json instead of the table.")
@click.option("--format", "kind", type=click.Choice(["terminal", "markdown"]), help="The table on stdout.")
@click.option(_ROWS_OPTION, "rows_to", type=click.Path(path_type=Path), hidden=True)
def replay_command(  # click passes options as keywords
    *,
    run_dir: Path,
    steps: tuple[int, ...],
    variants: tuple[str, ...],
    matrix: bool,
    trees: tuple[Path, ...],
    repeats: int,
    output: Path | None,
    as_json: bool,
    kind: str | None,
    rows_to: Path | None,
) -> None:
    """Replay RUN_DIR's captured steps (RUN_DIR/captures/, written by the run's `capture:` block, or by itself at
    its first NaN/Inf step) through the run's model and loss alone: forward, loss, backward, timed, the loss
    checked against the recording (bitwise on the CPU in fp32). RUN_DIR may be an unzipped artifact: a capture is
    read as untrusted data. Exit 0 when it ran (the rows say what each variant did), 2 for a capture that cannot
    be read or an unknown step.
    """
    from canary_action.train.replay import ReplayResult, Variant, replay
    from canary_action.train.replay import matrix as preset

    if as_json and kind is not None:
        raise UsageError("--json prints replay.json, not a table", fix="leave out --format")
    if Path.cwd().resolve().is_relative_to(run_dir.resolve()):
        # The captured config names code (trainer_factory, reward functions) that is imported from here: a run
        # folder is an artifact's content, not a checkout.
        raise UsageError(
            f"canary replay runs from inside {run_dir}: the captured config's code would be imported from the run "
            "folder (an artifact's files)",
            fix="run it from your checkout of the commit that trained it: cd there, then canary replay RUN_DIR",
        )
    require_training_stack("`canary replay`")
    _on_import_path(Path.cwd())  # the team's modules (trainer_factory, rewards) beside the config, as `canary run`
    chosen = [Variant.parse("")] + [Variant.parse(v) for v in variants]
    if matrix:
        import torch

        extra = preset("cuda" if torch.cuda.is_available() else "cpu")[1:]
        chosen += [v for v in extra if v.label not in {c.label for c in chosen}]
    result = replay(run_dir, chosen, steps=steps, repeats=repeats, say=lambda line: click.echo(line, err=True))
    if rows_to is not None:
        rows_to.write_text(result.model_dump_json(), encoding="utf-8")
        return
    rows = list(result.rows)
    for tree in trees:
        rows += _replay_in_tree(tree, run_dir, steps, repeats)
    result = ReplayResult(run_dir=result.run_dir, device=result.device, repeats=repeats, rows=rows)
    folder = output_folder(output if output is not None else DEFAULT_OUT, flag="-o")
    write_output(folder / "replay.json", result.model_dump_json(indent=2) + "\n", flag="-o", example="replay.json")
    write_output(folder / "replay.md", render(result, markdown=True), flag="-o", example="replay.md")
    emit(result.model_dump_json(indent=2) + "\n" if as_json else render(result, markdown=kind == "markdown"), None, "")


def _on_import_path(tree: Path) -> None:
    """The code tree after the installed packages, as a run's child process has it (canary_action/__init__.py)."""
    from canary_action.train.rewards import CODE_TREE_ENV

    os.environ.setdefault(CODE_TREE_ENV, str(tree))
    path = os.environ[CODE_TREE_ENV]
    if path not in sys.path:
        sys.path.append(path)


def _replay_in_tree(tree: Path, run_dir: Path, steps: Sequence[int], repeats: int) -> list[Any]:
    """The same steps replayed by a child process whose working directory and import path are `tree`."""
    from canary_action.train.replay import ReplayResult, ReplayRow

    rows_file = Path(tempfile.mkdtemp(prefix="canary-replay-tree-")) / "rows.json"  # ours, not the run folder's
    command = [sys.executable, "-m", "canary_action", "replay", str(run_dir.resolve()), "--repeats", str(repeats),
               _ROWS_OPTION, str(rows_file), *(f"--step={s}" for s in steps)]  # fmt: skip
    from canary_action.train.rewards import CODE_TREE_ENV

    env = {**os.environ, CODE_TREE_ENV: str(tree.resolve()), "PYTHONSAFEPATH": "1"}
    done = subprocess.run(command, cwd=tree, env=env, capture_output=True, text=True, check=False)
    label = f"tree {tree}"
    try:
        if done.returncode != 0 or not rows_file.is_file():
            last = (done.stderr.strip().splitlines() or ["no output"])[-1]
            return [ReplayRow(variant=label, step=s, rank=0, status="fails", error=last[:300]) for s in steps or [0]]
        child = ReplayResult.model_validate(json.loads(rows_file.read_text(encoding="utf-8")))
    finally:
        shutil.rmtree(rows_file.parent, ignore_errors=True)
    return [row.model_copy(update={"variant": label}) for row in child.rows]


def render(result: Any, *, markdown: bool) -> str:
    """The rows as a table: GitHub markdown, or aligned text for a terminal."""
    header = ["variant", "step", "forward ms", "backward ms", "peak MiB", "loss", "vs recorded", "note"]
    lines: list[list[str]] = []
    for row in result.rows:
        if row.status == "fails" or row.forward_ms is None or row.backward_ms is None:
            lines.append([row.variant, str(row.step), "", "", "", "", "", f"fails: {row.error}"])
            continue
        versus = "—"
        if not row.comparable:
            versus = "not comparable"
        elif row.bitwise_equal:
            versus = "bitwise equal"
        elif row.largest_difference is not None and row.comparable:
            if isinstance(row.largest_difference, float):
                versus = f"differs by {row.largest_difference:.3g}"
            else:  # one side NaN/Inf, the other not
                versus = "recorded finite" if row.non_finite else "recorded NaN/Inf"
        note = "NaN/Inf" if row.non_finite else ""
        if row.note:
            note = f"{note}; {row.note}" if note else row.note
        lines.append([
            row.variant, str(row.step), f"{row.forward_ms:.1f}", f"{row.backward_ms:.1f}",
            f"{row.peak_memory_mib:,.0f}" if row.peak_memory_mib is not None else "—", str(row.loss), versus, note,
        ])  # fmt: skip
    title = f"replay of {result.run_dir} on {result.device}, median of {result.repeats} repeats"
    if markdown:
        from canary_action.report.escape import text as inert

        out = [f"**{inert(title, 300)}**", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        # Our own figures as they are; what came from a config or an error (a variant, a note) made inert.
        out += ["| " + " | ".join(c if 0 < i < 5 else inert(c, 300) for i, c in enumerate(line)) + " |"
                for line in lines]  # fmt: skip
        return "\n".join(out) + "\n"
    widths = [max(len(r[i]) for r in [header, *lines]) for i in range(len(header))]
    plain = [title, "  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)).rstrip()]
    plain += ["  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip() for line in lines]
    return "\n".join(plain) + "\n"
